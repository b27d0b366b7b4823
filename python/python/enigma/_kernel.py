"""Kernels and compiled kernels: what ``@enigma.kernel`` and ``enigma.compile`` return.

* :class:`Kernel` wraps the decorated function. It keeps the function (which
  is never called) and compiles its source to IR on first use, so names the
  kernel reads from its module may be defined after it.
* :func:`compile_ir` compiles the IR's text form (what ``.ir`` prints) the
  same way, for kernels written or edited as IR.
* :class:`CompiledKernel` is a validated kernel with its specialisation
  values, backed by the native ``_enigma.CompiledKernel`` (which keeps its
  pipeline per device); it shows the IR text (``.ir``), the MSL (``.msl``)
  and the CUDA C++ (``.cuda``), describes its parameters for
  :class:`enigma.MetalRuntime`, and runs on arrays when called:
  ``compiled(a, out, n, grid=n, threads=256)``. ``enigma.compile`` returns
  the same compiled kernel for the same kernel and specialisation values.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import textwrap

from . import _enigma
from ._frontend import compile_function
from ._types import DType

CompileError = _enigma.CompileError
DispatchError = _enigma.DispatchError


class Kernel:
    """A kernel function decorated with ``@enigma.kernel``.

    Calling it from Python is an error: pass it to :func:`enigma.compile`.
    """

    def __init__(self, fn):
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TypeError(f"@enigma.kernel decorates a Python function, not {type(fn).__name__}")
        self.fn = fn
        self.name = fn.__name__
        self._ir = None
        self._compiled = {}  # (MSL version, specialisation values) -> CompiledKernel
        functools.update_wrapper(self, fn)

    def ir_dict(self) -> dict:
        """The IR's JSON form as a dict (compiled from the source once)."""
        if self._ir is None:
            _reject_python_scalar_annotations(self.fn)
            self._ir = compile_function(self.fn)
        return self._ir

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"kernel `{self.name}` runs on a device: compile it with enigma.compile({self.name}) and "
            "run it with enigma.MetalRuntime().execute(...)"
        )

    def __repr__(self):
        return f"<enigma.kernel {self.name}>"


_RUNTIME_MODULE = []


def _runtime():
    """enigma._runtime (imported on first use: it imports this module)."""
    if not _RUNTIME_MODULE:
        from . import _runtime as module
        _RUNTIME_MODULE.append(module)
    return _RUNTIME_MODULE[0]


# Python's scalar types as annotations, and what to write instead.
_PYTHON_SCALARS = {"int": "i32", "float": "f32", "bool": "bool_"}


def _reject_python_scalar_annotations(fn):
    """``size: int`` (numba's spelling of a by-value int): a CompileError
    saying to write ``size: enigma.constant(enigma.i32)``."""
    code = fn.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    for name in names:
        ann = fn.__annotations__.get(name)
        spelled = ann if isinstance(ann, str) else getattr(ann, "__name__", None) if ann in (int, float, bool) else None
        if spelled not in _PYTHON_SCALARS:
            continue
        t = _PYTHON_SCALARS[spelled]
        err = CompileError(
            f"{code.co_filename}:{_param_line(fn, name)}: parameter `{name}: {spelled}`: Python's {spelled} is not a "
            f"kernel type; write `{name}: enigma.constant(enigma.{t})` for a by-value {t} (or `{name}: enigma.{t}` "
            f"for a device buffer of them) (in kernel `{fn.__name__}`)"
        )
        err.file = code.co_filename
        err.line = _param_line(fn, name)
        raise err


def _param_line(fn, name):
    """The source line of parameter ``name`` (else of the ``def``)."""
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return fn.__code__.co_firstlineno
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg == name:
            return first + node.lineno - 1
    return fn.__code__.co_firstlineno


def kernel(fn) -> Kernel:
    """Decorator: marks ``fn`` as a kernel written in enigma's Python subset."""
    return Kernel(fn)


class Param:
    """One kernel parameter: a device buffer, a by-value scalar or a texture."""

    __slots__ = ("index", "name", "kind", "type_name", "scalar", "width", "elem_bytes", "access")

    def __init__(self, index, name, kind, type_name, scalar, width, elem_bytes, access):
        self.index = index
        self.name = name
        self.kind = kind  # "buffer", "value" or "texture"
        self.type_name = type_name
        self.scalar = scalar
        self.width = width
        self.elem_bytes = elem_bytes
        self.access = access  # "read", "read_write" (buffers), a texture's access, or None

    @property
    def dtype(self) -> DType:
        return DType(self.scalar, self.width)

    @property
    def is_buffer(self) -> bool:
        return self.kind == "buffer"

    @property
    def writable(self) -> bool:
        return self.access == "read_write"

    def __repr__(self):
        extra = f", {self.access}" if self.access else ""
        return f"Param({self.index}, {self.name!r}, {self.kind}, {self.type_name}{extra})"


class CompiledKernel:
    """A validated kernel, ready to run: what :func:`enigma.compile` returns."""

    def __init__(self, native, source=None):
        self._native = native
        self.source = source
        self.params = [Param(i, *p) for i, p in enumerate(native.params())]

    @property
    def name(self) -> str:
        """The kernel's name in the IR (the function's name)."""
        return self._native.name

    @property
    def ir(self) -> str:
        """The IR in its text form."""
        return self._native.ir

    @property
    def ir_json(self) -> str:
        """The IR in its JSON form (what the Python front end produced, validated)."""
        return self._native.json

    @property
    def msl(self) -> str:
        """Metal Shading Language source (specialisation constants stay function constants),
        for :attr:`msl_version`."""
        return self._native.msl

    @property
    def msl_version(self) -> str:
        """The MSL version :attr:`msl` is written for (``"3.2"``): the one asked for with
        ``enigma.compile(k, msl_version=...)``, else the one the kernel needs (3.2 where it
        uses ``device_fence()``, else 3.1)."""
        return self._native.msl_version

    @property
    def cuda(self) -> str:
        """CUDA C++ source, with this compilation's specialisation values."""
        return self._native.cuda

    @property
    def threadgroup_memory_bytes(self) -> int:
        """Bytes of threadgroup memory the kernel declares."""
        return self._native.threadgroup_memory_bytes

    @property
    def spec(self) -> dict:
        """The specialisation values in force, ``{name: value}``."""
        return dict(self._native.spec)

    def __repr__(self):
        sig = ", ".join(f"{p.name}: {p.type_name}{' (value)' if p.kind == 'value' else ''}" for p in self.params)
        return f"<enigma.CompiledKernel {self.name}({sig})>"

    def __call__(self, *args, grid=None, threads=(1, 1, 1), threadgroups=None, rt=None, device=None,
                 stream=None, sanitize=None, max_loop_iterations=None, timeout=None):
        """Runs the kernel on ``args``, one per parameter in order: arrays
        (``enigma.Array``, numpy, torch, CuPy...) bound in place — what the
        kernel writes lands in them — and numbers for by-value parameters.
        ``grid=`` counts threads (``dispatchThreads``), ``threadgroups=``
        counts threadgroups; ``threads=`` is the threadgroup size. It runs on
        ``rt`` (a :class:`enigma.MetalRuntime`), else on ``device``, else on
        the arrays' device (CUDA for CUDA tensors), else on ``"auto"``; on
        CUDA on ``stream`` or the tensors' current stream, without waiting.
        ``sanitize``, ``max_loop_iterations`` and ``timeout`` are as for
        :meth:`MetalRuntime.execute` (defaults: ``rt``'s settings, else off);
        with ``rt``, its ``last_report`` is this dispatch's. Returns None."""
        rtm = _runtime()
        name = self.name
        if len(args) != len(self.params):
            raise DispatchError(f"kernel `{name}` takes {len(self.params)} argument(s) ({', '.join(p.name for p in self.params)}), {len(args)} given")
        if (grid is None) == (threadgroups is None):
            raise DispatchError(f"kernel `{name}`: give exactly one of grid= (threads, dispatchThreads) and threadgroups= (dispatchThreadgroups)")
        mode, size = ("threads", grid) if grid is not None else ("threadgroups", threadgroups)
        size = rtm._geometry(size, "grid" if mode == "threads" else "threadgroups")
        tg = rtm._geometry(threads, "threads")
        budget = None if max_loop_iterations is None else rtm._loop_budget(max_loop_iterations)
        limit = None if timeout is None else rtm._timeout(timeout)
        if rt is not None:
            rt._reports.report = None
            sanitize = rt.sanitize if sanitize is None else sanitize
            budget = rt.max_loop_iterations if budget is None else budget
            limit = rt.timeout if limit is None else limit
            native = rt._rt
        elif device is not None:
            native = rtm.native_runtime(device)
        else:
            native = rtm.device_of(args)
        bound = []
        writeback = []
        for p, value in zip(self.params, args):
            if p.kind == "texture":
                bound.append(rtm._texture_arg(value, p, name))
            elif p.kind == "buffer":
                data, mv = rtm._buffer_arg(value, p, name)
                if mv is not None:
                    writeback.append((p, mv))
                bound.append(data)
            else:
                bound.append(rtm._scalar(value, p, name))
        handle, dl_stream = rtm.dispatch_stream(native, args, stream)
        results, report = native.dispatch(self._native, bound, mode, size, tg, bool(sanitize), handle, dl_stream, budget, limit)
        if rt is not None:
            rt._reports.report = json.loads(report)
        for p, mv in writeback:
            if p.writable:
                mv[:] = results[p.index]


def compile(kern, spec=None, *, msl_version: str | None = None, **constants) -> CompiledKernel:  # noqa: A001 - the seed's name
    """Compiles a ``@enigma.kernel`` function: source → IR → validation.

    Specialisation constants declared with ``enigma.spec(name, type, default)``
    take values from ``spec`` (a dict) or keyword arguments:
    ``enigma.compile(k, TILE=64)``. ``msl_version`` (``"3.0"``, ``"3.1"`` or
    ``"3.2"``) is the MSL version ``.msl`` is written for; by default the one
    the kernel needs. Raises :class:`enigma.CompileError` (also for an MSL
    version the generator does not write).
    """
    if isinstance(kern, CompiledKernel):
        if kern.source is None:
            return compile_ir(kern.ir, spec, msl_version=msl_version, **constants)
        kern = kern.source
    if not isinstance(kern, Kernel):
        if callable(kern) and hasattr(kern, "__code__"):
            kern = Kernel(kern)
        else:
            raise TypeError(f"enigma.compile takes an @enigma.kernel function, not {type(kern).__name__}")
    values = _spec_values(spec, constants)
    try:
        key = (msl_version, tuple(sorted((k, type(v).__name__, v) for k, v in values.items())))
        hash(key)
    except TypeError:
        key = None  # unhashable values: compiled afresh, and rejected there
    cached = kern._compiled.get(key) if key is not None else None
    if cached is not None:
        return cached
    ir = kern.ir_dict()
    native = _enigma.compile(json.dumps(ir), values or None, msl_version)
    compiled = CompiledKernel(native, kern)
    if key is not None:
        kern._compiled[key] = compiled
    return compiled


def _spec_values(spec, constants):
    values = dict(spec or {})
    overlap = set(values) & set(constants)
    if overlap:
        raise TypeError(f"specialisation constant(s) given twice: {', '.join(sorted(overlap))}")
    values.update(constants)
    # numpy scalars (np.bool_, np.int32, np.float32...) as the Python values
    # they hold, so they are checked like any other value.
    return {k: (v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v) for k, v in values.items()}


def compile_ir(text: str, spec=None, *, msl_version: str | None = None, **constants) -> CompiledKernel:
    """Compiles a kernel given in the IR's text form (``CompiledKernel.ir``);
    ``spec``, ``msl_version`` and the keyword arguments as in :func:`compile`.

    Raises :class:`enigma.CompileError` for text that does not parse or a
    kernel that does not validate.
    """
    if not isinstance(text, str):
        raise TypeError(f"enigma.compile_ir takes the IR's text form (a str), not {type(text).__name__}")
    values = _spec_values(spec, constants)
    native = _enigma.compile(_enigma.ir_text_to_json(text), values or None, msl_version)
    return CompiledKernel(native, None)
