"""Launching a compiled kernel: binding each argument to its parameter
(arrays in place, host buffers as bytes, numbers range-checked), checking the
dispatch geometry, and one dispatch on a native runtime.

:meth:`enigma.CompiledKernel.__call__` is :func:`launch`;
:meth:`enigma.MetalRuntime.execute` binds its inputs and outputs with
:func:`buffer_arg`, :func:`scalar_arg`, :func:`texture_arg` and
:func:`output_args` and dispatches the same way.
"""

from __future__ import annotations

import json
import numbers
from typing import Any, List, Optional, Sequence, Tuple

from . import _enigma
from ._mlx import host_dtype as _mlx_host_dtype
from ._mlx import is_mlx_array
from ._devices import DeviceName, Texture, device_of, dispatch_stream, dtype_name, is_array, native_runtime
from ._types import FORMAT_NAMES, NUMPY_NAMES, scalar_of_format

from ._launch_types import DispatchRuntime, LaunchableKernel, Param

DispatchError = _enigma.DispatchError

_U32 = 1 << 32


def geometry(value: Any, what: str) -> Sequence[int]:
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




def texture_arg(value: Any, p: Param, kernel_name: str) -> Any:
    if isinstance(value, Texture):
        return value.native
    raise DispatchError(
        f"kernel `{kernel_name}`, parameter `{p.name}` ({p.type_name}): expected an enigma texture "
        f"(rt.texture(array, format=...)), got {type(value).__name__}"
    )



def loop_budget(value: Any) -> Optional[int]:
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value < 2**64:
        raise DispatchError(f"max_loop_iterations must be an int between 0 and 2**64 - 1, not {value!r}")
    return int(value)


def timeout_seconds(value: Any) -> Optional[float]:
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0 < value < 1e9:
        raise DispatchError(f"timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def param_names(params: Sequence[Param]) -> str:
    return ", ".join(f"`{p.name}`" for p in params) or "none"



def buffer_arg(value: Any, p: Param, kernel_name: str) -> Tuple[Any, Any]:
    """(what the native runtime binds, writable memoryview to fill after the
    dispatch or None) for a buffer argument. numpy arrays are checked here
    (with numpy's names in the messages) and bound in Rust; other arrays
    (``enigma.Array``, DLPack, CUDA array interface) are checked and bound
    in Rust; other buffer-protocol objects go as bytes."""
    if type(value) is _enigma.Array or (is_array(value) and not hasattr(value, "__array_interface__")):
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


def scalar_arg(value: Any, p: Param, kernel_name: str) -> Any:
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


def output_args(name: str, out_params: Sequence[Param], output_size: Any, outputs: Any) -> List[Tuple[Any, Any]]:
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
            raise DispatchError(f"kernel `{name}`: {len(out_params)} output(s) ({param_names(out_params)}), {len(outputs)} given in outputs=")
        result = []
        for p, o in zip(out_params, outputs):
            if p.kind == "texture":
                result.append((texture_arg(o, p, name), None))  # written in place
                continue
            if is_array(o) and not hasattr(o, "__array_interface__"):
                result.append((o, None))  # device memory or DLPack: bound in place
                continue
            data, mv = buffer_arg(o, p, name)
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
        raise DispatchError(f"kernel `{name}`: output_size= (bytes) is needed for the output(s) {param_names(out_params)}")
    sizes = [output_size] if isinstance(output_size, numbers.Integral) else output_size
    try:
        sizes = list(sizes)
    except TypeError:
        raise DispatchError(f"kernel `{name}`: output_size must be an int (bytes) or a list of them, not {type(output_size).__name__}") from None
    if len(sizes) != len(out_params):
        raise DispatchError(
            f"kernel `{name}` has {len(out_params)} output(s) ({param_names(out_params)}) but output_size gives {len(sizes)} size(s)"
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


def launch(compiled: LaunchableKernel, args: Sequence[Any], *, grid: Any = None, threads: Any = (1, 1, 1),
           threadgroups: Any = None, rt: Optional[DispatchRuntime] = None, device: Optional[DeviceName] = None,
           stream: Any = None, sanitize: Optional[bool] = None, max_loop_iterations: Optional[int] = None,
           timeout: Optional[float] = None) -> None:
    """Runs ``compiled`` once on ``args`` (one per parameter, in order):
    what :meth:`enigma.CompiledKernel.__call__` documents."""
    name = compiled.name
    if len(args) != len(compiled.params):
        raise DispatchError(f"kernel `{name}` takes {len(compiled.params)} argument(s) ({', '.join(p.name for p in compiled.params)}), {len(args)} given")
    compiled, sizes = compiled.for_arrays(args)
    params = compiled.params
    if (grid is None) == (threadgroups is None):
        raise DispatchError(f"kernel `{name}`: give exactly one of grid= (threads, dispatchThreads) and threadgroups= (dispatchThreadgroups)")
    mode, size = ("threads", grid) if grid is not None else ("threadgroups", threadgroups)
    size = geometry(size, "grid" if mode == "threads" else "threadgroups")
    tg = geometry(threads, "threads")
    budget = None if max_loop_iterations is None else loop_budget(max_loop_iterations)
    limit = None if timeout is None else timeout_seconds(timeout)
    if rt is not None:
        rt.begin_dispatch()
        sanitize = rt.sanitize if sanitize is None else sanitize
        budget = rt.max_loop_iterations if budget is None else budget
        limit = rt.timeout if limit is None else limit
        native = rt.native
    elif device is not None:
        native = native_runtime(device)
    else:
        native = device_of(args)
    bound = []
    writeback = []
    for p, value in zip(params, args):
        if p.kind == "texture":
            bound.append(texture_arg(value, p, name))
        elif p.kind == "buffer":
            data, mv = buffer_arg(value, p, name)
            if mv is not None:
                writeback.append((p, mv))
            bound.append(data)
        else:
            bound.append(scalar_arg(value, p, name))
    bound.extend(sizes)
    handle, dl_stream = dispatch_stream(native, args, stream)
    results, report = native.dispatch(compiled.native, bound, mode, size, tg, bool(sanitize), handle, dl_stream, budget, limit)
    if rt is not None:
        rt.end_dispatch(json.loads(report))
    for p, mv in writeback:
        if p.writable:
            mv[:] = results[p.index]


def mlx_arguments(compiled: LaunchableKernel, inputs: Sequence[Any], output_shapes: Any, output_dtypes: Any,
                  init_value: Any) -> Tuple[List[Any], List[Any]]:
    """(one argument per parameter, the outputs) for a call in MLX's
    convention. As ``mx.fast.metal_kernel`` splits its parameters into input
    and output names, the outputs are the buffers the kernel writes and the
    inputs every other parameter, each in the kernel's order; the outputs
    are host arrays made here, shaped and typed by ``output_shapes`` and
    ``output_dtypes`` (checked against the parameter's element type) and
    filled with ``init_value`` where given."""
    import numpy as np

    name = compiled.name
    params = compiled.params
    in_params = [p for p in params if not (p.is_buffer and p.writable)]
    out_params = [p for p in params if p.is_buffer and p.writable]
    if len(inputs) != len(in_params):
        raise DispatchError(
            f"kernel `{name}` takes {len(in_params)} input(s) ({param_names(in_params)}; the buffers it writes, "
            f"{param_names(out_params) or 'none'}, are its outputs); {len(inputs)} given"
        )
    shapes, dtypes = list(output_shapes or ()), list(output_dtypes or ())
    if len(shapes) != len(out_params) or len(dtypes) != len(out_params):
        raise DispatchError(
            f"kernel `{name}` has {len(out_params)} output(s) ({param_names(out_params)}); output_shapes gives "
            f"{len(shapes)} and output_dtypes {len(dtypes)}"
        )
    outs = []
    for p, shape, dtype in zip(out_params, shapes, dtypes):
        got = dtype_name(dtype)
        if got != p.scalar:
            raise DispatchError(f"kernel `{name}`, output `{p.name}`: the kernel writes {p.type_name} elements, output_dtypes gives {got}")
        host_dtype = _mlx_host_dtype(p.scalar)
        dims = tuple(int(d) for d in ((shape,) if isinstance(shape, numbers.Integral) else shape))
        host = np.empty(dims, dtype=host_dtype) if init_value is None else np.full(dims, init_value, dtype=host_dtype)
        if p.width > 1 and host.size % p.width:
            raise DispatchError(f"kernel `{name}`, output `{p.name}`: {host.size} elements is not a whole number of {p.type_name} vectors")
        outs.append(host)
    given = iter([x.item() if is_mlx_array(x) and x.ndim == 0 else x for x in inputs])
    made = iter(outs)
    args = [next(made) if p.is_buffer and p.writable else next(given) for p in params]
    return args, outs


def check_mlx_grid(name: str, grid: Sequence[int], threadgroup: Sequence[int], outputs: Sequence[Any]) -> None:
    """Warns where ``grid`` looks like a count of threadgroups: in MLX's
    convention ``grid`` counts threads, so a grid smaller than its
    threadgroup whose product with it is an output's size most likely meant
    threadgroups, and would leave most of the output unwritten."""
    total = 1
    for g in grid:
        total *= g
    per_group = 1
    for t in threadgroup:
        per_group *= t
    sizes = {o.size for o in outputs}
    if total < per_group and total * per_group in sizes:
        import warnings

        warnings.warn(
            f"kernel `{name}`: grid={tuple(grid)} launches {total} thread(s), fewer than one threadgroup of "
            f"{tuple(threadgroup)}, and grid x threadgroup = {total * per_group} is an output's size: grid counts "
            f"threads (dispatchThreads), as in MLX; for {total} threadgroups pass grid={total * per_group} "
            f"(threads), or threadgroups={tuple(grid)} in enigma's own call",
            stacklevel=4,
        )
