"""Compiling: a kernel's source (or IR text) → validated IR → a
:class:`CompiledKernel`.

* :func:`compile` compiles a ``@enigma.kernel`` function through the Python
  front end (``_frontend``) and the native validator.
* :func:`compile_ir` compiles the IR's text form (what ``.ir`` prints) the
  same way, for kernels written or edited as IR.
* :class:`CompiledKernel` is a validated kernel with its specialisation
  values, backed by the native ``_enigma.CompiledKernel`` (which keeps its
  pipeline per device); it shows the IR text (``.ir``), the MSL (``.msl``)
  and the CUDA C++ (``.cuda``), describes its parameters for
  :class:`enigma.MetalRuntime`, and runs on arrays when called
  (``compiled(a, out, n, grid=n, threads=256)``, through ``_launch``).
  ``enigma.compile`` returns the same compiled kernel for the same kernel
  and specialisation values.
"""

from __future__ import annotations

import ast
import inspect
import json
import numbers
import textwrap
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _enigma
from ._frontend import ArrayShape, compile_kernel
from ._kernel import Kernel
from . import _mlx
from ._launch import check_mlx_grid, geometry, launch, mlx_arguments
from ._launch_types import DispatchRuntime, Param
from .mlx import MLXKernel, metal_kernel

if TYPE_CHECKING:
    from ._devices import DeviceName

CompileError = _enigma.CompileError
DispatchError = _enigma.DispatchError


def kernel_ir(kern: Kernel) -> Dict[str, Any]:
    """The IR's JSON form of ``kern`` as a dict (compiled from the source
    once; for arrays that give buffers their shapes, of the ranks the body
    implies)."""
    return _front_end(kern, None)[0]


def _front_end(kern: Kernel, ranks: Optional[Mapping[str, int]]) -> Tuple[Dict[str, Any], Tuple[ArrayShape, ...]]:
    """(the IR dict, the buffers that take their shapes from the arrays
    passed) of ``kern`` for ``ranks`` ({parameter: rank}; None: the ranks
    its body implies), compiled from the source once per ranks."""
    key = None if ranks is None else tuple(sorted(ranks.items()))
    done = kern.by_ranks.get(key)
    if done is None:
        _reject_python_scalar_annotations(kern.fn)
        ir, shapes = compile_kernel(kern.fn, ranks)
        done = kern.by_ranks[key] = (ir, tuple(shapes))
        if key is None:
            kern.ir = ir
    return done


# Python's scalar types as annotations, and what to write instead.
_PYTHON_SCALARS = {"int": "i32", "float": "f32", "bool": "bool_"}


def _reject_python_scalar_annotations(fn: Callable[..., Any]) -> None:
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


def _param_line(fn: Callable[..., Any], name: str) -> int:
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


class CompiledKernel:
    """A validated kernel, ready to run: what :func:`enigma.compile` returns."""

    def __init__(self, native: Any, source: Optional[Kernel] = None, array_shapes: Sequence[ArrayShape] = (),
                 msl_version: Optional[str] = None) -> None:
        self._native = native
        #: The kernel it was compiled from (None for IR text).
        self.source = source
        #: The buffers that take their shapes from the arrays passed, with
        #: the ranks compiled for; their sizes are by-value parameters after
        #: :attr:`params`, which a dispatch fills from the arrays.
        self.array_shapes: Tuple[ArrayShape, ...] = tuple(array_shapes)
        self._msl_version_asked = msl_version
        every = [Param(i, *p) for i, p in enumerate(native.params())]
        #: The parameters a call passes, in order.
        self.params: List[Param] = every[: len(every) - sum(a.rank for a in self.array_shapes)]

    def for_arrays(self, args: Sequence[Any]) -> Tuple[CompiledKernel, List[int]]:
        """(the compilation for the ranks of ``args``' arrays, the sizes a
        dispatch passes after the arguments) where buffers take their shapes
        from the arrays passed; (self, []) elsewhere. A kernel is compiled
        once per rank, never per size."""
        if not self.array_shapes:
            return self, []
        shapes = [_array_shape(args[a.param] if a.param < len(args) else None, a, self.name) for a in self.array_shapes]
        compiled = self
        if any(len(s) != a.rank for s, a in zip(shapes, self.array_shapes)):
            assert self.source is not None  # only the front end gives buffers their shapes from arrays
            ranks = {a.name: len(s) for s, a in zip(shapes, self.array_shapes)}
            compiled = _compile_source(self.source, self.spec, self._msl_version_asked, ranks)
        return compiled, [d for s in shapes for d in s]

    @property
    def native(self) -> Any:
        """The native compiled kernel (``enigma._enigma.CompiledKernel``) a dispatch binds."""
        return self._native

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
        """Metal Shading Language source (specialisation constants stay function
        constants), for :attr:`msl_version`."""
        return self._native.msl

    @property
    def msl_version(self) -> str:
        """The MSL version :attr:`msl` is written for (``"3.2"``): the one asked
        for with ``enigma.compile(k, msl_version=...)``, else the one the kernel
        needs (3.2 where it uses ``device_fence()`` or ``enigma.print``, else 3.1)."""
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
    def spec(self) -> Dict[str, Any]:
        """The specialisation values in force, ``{name: value}``."""
        return dict(self._native.spec)

    def to_mlx(self) -> MLXKernel:
        """This kernel as an ``mx.fast.metal_kernel`` for MLX programs on a
        Mac (:func:`enigma.mlx.metal_kernel`): its MSL split into MLX's
        header and body, called in MLX's convention.

        Raises:
            enigma.mlx.ExportError: a parameter MLX's signature cannot express.
        """
        return metal_kernel(self)

    def __repr__(self) -> str:
        sig = ", ".join(f"{p.name}: {p.type_name}{' (value)' if p.kind == 'value' else ''}" for p in self.params)
        return f"<enigma.CompiledKernel {self.name}({sig})>"

    def __call__(self, *args: Any, grid: Any = None, threads: Any = (1, 1, 1), threadgroups: Any = None,
                 rt: Optional[DispatchRuntime] = None, device: Optional[DeviceName] = None, stream: Any = None,
                 sanitize: Optional[bool] = None, max_loop_iterations: Optional[int] = None,
                 timeout: Optional[float] = None, inputs: Optional[Sequence[Any]] = None, threadgroup: Any = None,
                 output_shapes: Optional[Sequence[Any]] = None, output_dtypes: Optional[Sequence[Any]] = None,
                 template: Optional[Sequence[Tuple[str, Any]]] = None, init_value: Any = None,
                 verbose: bool = False) -> Optional[List[Any]]:
        """Runs the kernel on ``args``, one per parameter in order: arrays
        (``enigma.Array``, numpy, torch, CuPy...) bound in place — what the
        kernel writes lands in them — and numbers for by-value parameters.

        Called with ``inputs=`` instead, it follows MLX's convention for
        ``mx.fast.metal_kernel`` objects:
        ``compiled(inputs=[...], grid=(...), threadgroup=(...),
        output_shapes=[...], output_dtypes=[...])`` returns the list of
        outputs. As MLX splits a kernel's parameters into input and output
        names, the outputs are the buffers the kernel writes and the inputs
        every other parameter, each in the kernel's order (a by-value
        parameter may be a 0-d ``mx.array``, as MLX passes scalars); the
        outputs are made here, filled with ``init_value`` where given.
        ``grid`` counts threads, as in MLX (a grid that looks like a count
        of threadgroups is warned about). ``template`` gives specialisation
        constants as ``(name, value)`` pairs; the types come from the
        kernel's annotations, so an MLX dtype there is refused. The outputs
        are ``mx.array``s when an input is one, else numpy arrays; ``stream``
        may be MLX's (ignored: the dispatch runs before the call returns).
        ``verbose=True`` prints the kernel's MSL.

        Args:
            args: one per parameter, in order.
            grid: threads in the grid (``dispatchThreads``), 1 to 3 ints.
            threads: threads per threadgroup, 1 to 3 ints.
            threadgroups: threadgroups in the grid (``dispatchThreadgroups``),
                instead of ``grid``.
            rt: the :class:`enigma.MetalRuntime` to run on; with it, its
                ``last_report`` is this dispatch's.
            device: the device when ``rt`` is not given (``"auto"``,
                ``"sim"``, also ``"cpu"``, ``"metal"``, ``"cuda"``); default:
                the arrays' device (CUDA for CUDA tensors), else ``"auto"``.
            stream: the CUDA stream (default: the tensors' current stream);
                the dispatch is queued without waiting.
            sanitize, max_loop_iterations, timeout: as for
                :meth:`MetalRuntime.execute` (defaults: ``rt``'s settings,
                else off).

            inputs, threadgroup, output_shapes, output_dtypes, template,
                init_value, verbose: MLX's call convention (above).

        Returns:
            None: the results are in the arrays; in MLX's convention, the
            list of outputs.
        """
        if inputs is not None:
            return self._call_as_mlx(
                args, inputs, grid=grid, threadgroup=threadgroup, threads=threads, threadgroups=threadgroups,
                output_shapes=output_shapes, output_dtypes=output_dtypes, template=template, init_value=init_value,
                verbose=verbose, rt=rt, device=device, stream=stream, sanitize=sanitize,
                max_loop_iterations=max_loop_iterations, timeout=timeout,
            )
        launch(self, args, grid=grid, threads=threads, threadgroups=threadgroups, rt=rt, device=device, stream=stream,
               sanitize=sanitize, max_loop_iterations=max_loop_iterations, timeout=timeout)
        return None

    def _call_as_mlx(self, args: Sequence[Any], inputs: Sequence[Any], *, grid: Any, threadgroup: Any, threads: Any,
                     threadgroups: Any, output_shapes: Optional[Sequence[Any]], output_dtypes: Optional[Sequence[Any]],
                     template: Optional[Sequence[Tuple[str, Any]]], init_value: Any, verbose: bool,
                     rt: Optional[DispatchRuntime], device: Optional[DeviceName], stream: Any, sanitize: Optional[bool],
                     max_loop_iterations: Optional[int], timeout: Optional[float]) -> List[Any]:
        """A call in MLX's convention (see :meth:`__call__`)."""
        name = self.name
        if args:
            raise DispatchError(f"kernel `{name}`: give the arguments either positionally or as inputs= (MLX's convention), not both")
        if threadgroups is not None or tuple(threads) != (1, 1, 1):
            raise DispatchError(f"kernel `{name}`: in MLX's convention the launch is grid= (threads) and threadgroup=; threads= and threadgroups= are enigma's own call's")
        if grid is None or threadgroup is None:
            raise DispatchError(f"kernel `{name}`: MLX's convention needs grid= (threads in the grid) and threadgroup=")
        if isinstance(inputs, (str, bytes)) or not hasattr(inputs, "__iter__"):
            raise DispatchError(f"kernel `{name}`: inputs must be a list (one entry per input parameter)")
        inputs = [_mlx.contiguous(x) if _mlx.is_mlx_array(x) else x for x in inputs]
        compiled = self
        if template:
            values: Dict[str, Any] = {}
            for entry in template:
                key, value = entry
                if _mlx.is_mlx_dtype(value) or isinstance(value, type):
                    raise DispatchError(
                        f"kernel `{name}`: template type `{key}`={value}: an enigma kernel's types come from its "
                        f"annotations; template= gives specialisation constants (ints and bools) only"
                    )
                values[key] = value
            compiled = compile(self, values)
        if verbose:
            print(compiled.msl)
        arguments, outputs = mlx_arguments(compiled, inputs, output_shapes, output_dtypes, init_value)
        size, tg = geometry(grid, "grid"), geometry(threadgroup, "threadgroup")
        check_mlx_grid(name, size, tg, outputs)
        launch(compiled, arguments, grid=tuple(size), threads=tuple(tg), rt=rt, device=device,
               stream=None if _mlx.is_mlx_stream(stream) else stream, sanitize=sanitize,
               max_loop_iterations=max_loop_iterations, timeout=timeout)
        if not _mlx.any_mlx(inputs):
            return outputs
        written = [p for p in compiled.params if p.is_buffer and p.writable]
        return [_mlx.from_host(host, p.scalar) for p, host in zip(written, outputs)]


def compile(kern: Union[Kernel, CompiledKernel, Callable[..., Any]], spec: Optional[Mapping[str, Any]] = None,  # noqa: A001 - the seed's name
            *, msl_version: Optional[str] = None, **constants: Any) -> CompiledKernel:
    """Compiles a ``@enigma.kernel`` function: source → IR → validation.

    Args:
        kern: the kernel (a plain function is taken as one).
        spec: values of the specialisation constants declared with
            ``enigma.spec(name, type, default)``.
        msl_version: the MSL version ``.msl`` is written for (``"3.0"``,
            ``"3.1"`` or ``"3.2"``); default: the one the kernel needs.
        constants: the same as keyword arguments: ``enigma.compile(k, TILE=64)``.

    Returns:
        the :class:`CompiledKernel` (the same one for the same kernel, values
        and MSL version).

    Raises:
        enigma.CompileError: the source is not in the kernel language, or
            the kernel does not validate.
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
    return _compile_source(kern, _spec_values(spec, constants), msl_version, None)


def _compile_source(kern: Kernel, values: Mapping[str, Any], msl_version: Optional[str],
                    ranks: Optional[Mapping[str, int]]) -> CompiledKernel:
    """``kern`` compiled with specialisation ``values`` for ``msl_version``
    and, where buffers take their shapes from the arrays passed, for
    ``ranks`` (None: the ranks its body implies); cached on ``kern``."""
    try:
        key = (msl_version, tuple(sorted((k, type(v).__name__, v) for k, v in values.items())),
               None if ranks is None else tuple(sorted(ranks.items())))
        hash(key)
    except TypeError:
        key = None  # unhashable values: compiled afresh, and rejected there
    cached = kern.compiled.get(key) if key is not None else None
    if cached is not None:
        return cached
    ir, array_shapes = _front_end(kern, ranks)
    native = _enigma.compile(json.dumps(ir), dict(values) or None, msl_version)
    compiled = CompiledKernel(native, kern, array_shapes, msl_version)
    if key is not None:
        kern.compiled[key] = compiled
    return compiled


def _size(d: Any) -> int:
    """One entry of an array's shape as an int (a TypeError if it is not one)."""
    if not isinstance(d, numbers.Integral) or isinstance(d, bool):
        raise TypeError(d)
    return int(d)


def _array_shape(value: Any, a: ArrayShape, kernel_name: str) -> Tuple[int, ...]:
    """The shape of ``value``, passed for buffer ``a`` that takes its shape
    from the array passed: a tuple of sizes below 2**32."""
    shape = getattr(value, "shape", None)
    what = f"kernel `{kernel_name}`, buffer `{a.name}`"
    if value is None:
        raise DispatchError(
            f"{what} takes its shape from the array passed, and none was given (an output sized by output_size= "
            f"has no shape: pass the array in outputs=)"
        )
    try:
        dims = None if shape is None or isinstance(shape, (str, bytes)) else tuple(_size(d) for d in shape)
    except (TypeError, ValueError):
        dims = None
    if dims is None:
        raise DispatchError(
            f"{what} takes its shape from the array passed (the kernel indexes it per dimension or reads `{a.name}.shape`), "
            f"but a {type(value).__name__} has no shape: pass an array (numpy, torch, enigma.Array, ...)"
        )
    if not dims:
        raise DispatchError(f"{what}: the array passed has no dimensions (a 0-d array); pass an array of rank 1 or more")
    big = [d for d in dims if not 0 <= d < (1 << 32)]
    if big:
        raise DispatchError(f"{what}: a dimension of {big[0]} elements does not fit the u32 the kernel reads sizes as (shape {dims})")
    return dims


def _spec_values(spec: Optional[Mapping[str, Any]], constants: Mapping[str, Any]) -> Dict[str, Any]:
    values = dict(spec or {})
    overlap = set(values) & set(constants)
    if overlap:
        raise TypeError(f"specialisation constant(s) given twice: {', '.join(sorted(overlap))}")
    values.update(constants)
    # numpy scalars (np.bool_, np.int32, np.float32...) as the Python values
    # they hold, so they are checked like any other value.
    return {k: (v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v) for k, v in values.items()}


def compile_ir(text: str, spec: Optional[Mapping[str, Any]] = None, *, msl_version: Optional[str] = None,
               **constants: Any) -> CompiledKernel:
    """Compiles a kernel given in the IR's text form (``CompiledKernel.ir``).

    Args:
        text: the IR text.
        spec: values of its specialisation constants.
        msl_version: the MSL version ``.msl`` is written for, as for :func:`compile`.
        constants: the same as keyword arguments.

    Returns:
        the :class:`CompiledKernel`.

    Raises:
        enigma.CompileError: the text does not parse or the kernel does not validate.
    """
    if not isinstance(text, str):
        raise TypeError(f"enigma.compile_ir takes the IR's text form (a str), not {type(text).__name__}")
    values = _spec_values(spec, constants)
    native = _enigma.compile(_enigma.ir_text_to_json(text), values or None, msl_version)
    return CompiledKernel(native, None)
