"""enigma: GPU compute kernels in the Metal execution model, from Python.

Write a kernel as a decorated Python function; enigma reads its source
(``inspect`` + ``ast``; the function is never called), compiles it to
enigma's IR, validates it in Rust, and runs it on the CPU simulator (the
default where no GPU is present), CUDA or Metal::

    import enigma, numpy as np

    @enigma.kernel
    def add_one(A: enigma.f32, Out: enigma.f32):
        tid = enigma.thread_position_in_grid
        Out[tid] = A[tid] + 1.0

    rt = enigma.MetalRuntime()                      # rt.device: "sim", "cuda" or "metal"
    out = rt.execute(enigma.compile(add_one), inputs=[np.ones(64, np.float32)],
                     output_size=64 * 4, grid=(64, 1, 1), threads=(32, 1, 1))
    np.frombuffer(out, np.float32)                  # 64 × 2.0

Compiled kernels also run on arrays in place, on the arrays' device:
``enigma.compile(add_one)(a, out, grid=64, threads=32)`` with numpy arrays,
``enigma.Array`` device arrays (``enigma.asarray``, ``enigma.empty``) or
torch/CuPy CUDA tensors (no copies; on their current stream, without a
wait; ``enigma.synchronize()`` waits).

The kernel language (a subset of Python):

* Parameters are annotated: a type (``enigma.f32``, ``enigma.u32``,
  ``enigma.half4`` …) is a device buffer of that element type, read-only
  unless the kernel writes it; ``enigma.constant(T)`` is a by-value scalar;
  ``enigma.buffer(T, access=..., shape=...)`` states the access explicitly
  and/or gives the buffer a shape (below). Python's
  ``int``, ``float`` and ``bool`` are not kernel types (an ``int`` could be
  any width): ``size: int`` is a :class:`CompileError` that says to write
  ``size: enigma.constant(enigma.i32)`` (numba's by-value ``int``). The
  numpy spellings (``enigma.float32``, ``enigma.int32`` …) do not exist
  either; the error names enigma's (``enigma.f32``, ``enigma.i32``).
* Statements: assignments (a name keeps the type of its first assignment;
  a loop may carry it: ``acc = acc + x[i]``), augmented assignments, stores
  to ``buffer[i]`` and ``threadgroup_array[i]``, ``with enigma.if_(c):`` /
  ``with enigma.elif_(c):`` / ``with enigma.else_():`` (or plain
  ``if``/``elif``/``else``), ``with enigma.for_range(a, b[, step]) as i:``
  (or ``for i in range(...)``), ``while``, ``break``, ``continue``, early
  ``return``, ``enigma.barrier(mem_flags="mem_threadgroup")``
  (``threadgroup_barrier``, ``simdgroup_barrier``), atomics.
* Expressions: arithmetic (between integers ``/`` and ``//`` both divide
  as C does, truncating toward zero: ``-7 // 2`` is ``-3``, not Python's
  ``-4``; ``%`` is C's remainder, with the sign of the dividend: ``-7 % 2``
  is ``-1``; between floats ``/`` is true division, ``//`` the floor of the
  quotient, and ``%`` is C's ``fmod``: ``-7.5 % 2.0`` is ``-1.5``, not
  Python's ``0.5``), comparisons (or ``enigma.cmp_eq/ne/lt/le/gt/ge``), ``and``,
  ``or``, ``not``, bit operators, ``a if c else b``, vector components and
  swizzles (``v.xy``), casts and constructors (``enigma.f32(x)``,
  ``enigma.float4(a, b, c, d)``), the math functions (``enigma.exp`` …,
  ``enigma.fast.exp`` …), every SIMD-group function under its MSL name
  (``enigma.simd_sum`` … ``enigma.simd_is_first``), ``enigma.select``,
  ``enigma.as_type``, ``enigma.load_if(buf, i, cond, default)``.
* Thread positions are unsigned (u32), as in Metal — not signed as in numba:
  ``i - 2`` wraps to a huge number when ``i < 2``. The front end refuses the
  common trap ``max(i - 2, 0)`` (it never clamps) and says to subtract in a
  signed type, ``max(enigma.i32(i) - 2, 0)``; elsewhere, convert first where a
  difference may go below zero.
* ``out: enigma.texture2d(enigma.f32, access="write")`` is a 2D texture
  (texels f32, f16, i32 or u32; access ``"read"``, ``"write"``,
  ``"read_write"`` or ``"sample"``): ``out.read(coord)`` gives four texels,
  ``out.write(value, coord)`` stores four (or one, splatted),
  ``out.get_width()`` / ``out.get_height()``; ``coord`` is a ``uint2`` or a
  pair ``(x, y)``. A ``"sample"`` texture of f32/f16 texels has
  ``src.sample(enigma.sampler(filter="linear", address="clamp_to_edge",
  coord="normalized"), uv)``; a ``"read_write"`` one ``img.fence()``, needed
  between a thread's write of a texel and its read of it. Create textures with ``rt.texture(numpy_array,
  format="rgba8unorm")`` and read them back with ``tex.numpy()``. Only
  ``enigma.barrier(mem_flags="mem_texture")`` orders texture accesses
  between threads. They run on the simulator; sampling is not there yet.
* Builtins are MSL's attributes: ``enigma.thread_position_in_grid`` (a
  ``uint3``; used where a scalar is needed it means ``.x``), with an axis
  ``enigma.thread_position_in_threadgroup("x")`` (or ``0``, or ``.x``), and
  the scalar ones called or not: ``enigma.thread_index_in_simdgroup()``.
* Python numbers (literals and module-level constants) adapt to the other
  operand's type, as MSL literals do; alone they are ``int``/``float``.
* ``acc = enigma.thread_array(enigma.f32, 8)`` (or a shape, ``(4, 4)``)
  declares an array each thread has its own copy of (MSL's ``thread float
  acc[8]``), indexed ``acc[i]`` or ``acc[i, j]``; its elements start
  uninitialised (a read before the thread writes one is a sanitizer
  finding). ``for i in enigma.static_range(8):`` is a loop unrolled at
  compile time (constant bounds, ``#pragma unroll``), so a per-thread array
  indexed by ``i`` stays in registers.
* SIMD-group matrices in MSL's spelling: ``a = enigma.simdgroup_matrix(
  enigma.f16, 8, 8)`` declares one in the kernel; ``enigma.simdgroup_load(a,
  A, elements_per_row, (column, row), transpose_matrix)``,
  ``enigma.simdgroup_store(c, C, elements_per_row, (column, row))``,
  ``enigma.simdgroup_multiply(d, a, b)`` and
  ``enigma.simdgroup_multiply_accumulate(d, a, b, c)`` fill them through
  their first argument, as in Metal.
* Comparing a signed with an unsigned integer (``i < n`` with ``i: i32``,
  ``n: u32``) is refused: convert one side. ``math.inf``, ``float("inf")``,
  ``float("nan")``, ``enigma.inf`` and ``enigma.nan`` are constants. The
  functions, their types and each backend's spelling are listed in
  ``docs/kernel-functions.md``.
* ``scratch = enigma.threadgroup_alloc("float", 32)`` declares threadgroup
  memory; ``T = enigma.spec("T", enigma.u32, 32)`` a specialisation
  constant, set with ``enigma.compile(k, T=64)``.
* ``enigma.async_copy(tile[i], src[j], count=4, valid=j < n)`` starts
  copying ``count`` elements of device buffer ``src`` into threadgroup array
  ``tile`` (4, 8 or 16 bytes, both ends aligned to that size; zeros where
  ``valid`` is false, without reading ``src``); ``enigma.async_commit()``
  closes this thread's group of copies and ``enigma.async_wait(pending)``
  waits until at most ``pending`` (a constant, at most 7) of its groups are
  in flight. After the wait and a barrier the copied elements are readable
  by every thread; touching them before the wait is an
  ``async_copy_in_flight`` sanitizer finding, reading another thread's before
  the barrier a race. On CUDA this is ``cp.async``.
* ``enigma.device_fence()`` orders this thread's device-memory accesses for
  every thread of the dispatch (CUDA's ``__threadfence()``, MSL 3.2's
  device-scoped ``atomic_thread_fence``). With an atomic it hands results
  from one threadgroup to another: write, ``threadgroup_barrier``, then one
  thread fences and takes a ticket with ``atomic_fetch_add``; the threadgroup
  with the last ticket fences and, after a barrier, reads what all wrote.
* Multi-dimensional indexing (row-major, like numpy's C order): a buffer
  declared with a shape, ``out: enigma.buffer(enigma.f32, shape=("n", "m"))``
  (each size an int, or the name of a by-value parameter, a specialisation
  constant or a module constant; the first may be ``None``), and a
  threadgroup array allocated with one, ``tile = enigma.threadgroup_alloc(
  enigma.f32, (16, 16))``, take one subscript per dimension: ``out[i, j]``
  is ``out[i * m + j]`` (the flat form works too). Each subscript is checked
  against its dimension on the simulator: ``out[1, 5]`` of a 3×4 ``out``
  lands inside the buffer, but is refused ("index 5 of dimension 1, size
  4"), a sanitizer finding under ``sanitize=True``; GPUs check no bounds.

Anything else is rejected with :class:`CompileError` naming the file, the
line and the construct. Errors are all :class:`EnigmaError`:
:class:`CompileError`, :class:`DispatchError` (with its subclass
:class:`DeviceError`) and :class:`SanitizerError` (``.reports``: a list of
dicts), each carrying the Rust core's message.
"""

from __future__ import annotations

from . import _enigma
from ._enigma import CompileError, DeviceError, DispatchError, EnigmaError, SanitizerError
from ._kernel import CompiledKernel, Kernel, compile, compile_ir, kernel
from ._lang import BUILTINS as _BUILTINS
from ._lang import INTRINSICS as _INTRINSICS
from ._lang import buffer, constant, fast, sampler, texture2d
from ._enigma import Array
from ._runtime import MetalRuntime, Texture, asarray, empty, synchronize
from . import ops
from .ops import tune
from ._types import PUBLIC_TYPES as _PUBLIC_TYPES
from ._types import DType, MatrixType, simdgroup_matrix

__version__ = _enigma.__version__

globals().update(_PUBLIC_TYPES)
globals().update(_BUILTINS)
globals().update(_INTRINSICS)

#: Infinity and NaN as kernel constants (``x = -enigma.inf``); ``math.inf``,
#: ``float("inf")`` and ``float("nan")`` are read the same way.
inf = float("inf")
nan = float("nan")

# numpy's (and torch's) names of the scalar types, for the error that
# suggests enigma's.
_NUMPY_NAMES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f32 (there is no f64)",
    "double": "f32 (there is no f64)", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool_",
}


def __getattr__(name):
    """``enigma.float32`` and other names enigma lacks: an AttributeError
    that says what enigma calls it."""
    if name in _NUMPY_NAMES:
        hint = f"; the type is enigma.{_NUMPY_NAMES[name]}"
    else:
        import difflib

        close = difflib.get_close_matches(name, __all__, n=3)
        hint = f"; did you mean {', '.join('enigma.' + c for c in close)}?" if close else ""
    raise AttributeError(f"module 'enigma' has no attribute '{name}'{hint}")

__all__ = sorted(
    ["Array", "CompileError", "CompiledKernel", "DType", "DeviceError", "DispatchError", "EnigmaError", "Kernel",
     "MatrixType", "MetalRuntime", "SanitizerError", "Texture", "asarray", "buffer", "compile", "compile_ir", "constant",
     "empty", "fast", "kernel", "sampler", "simdgroup_matrix", "synchronize", "texture2d"]
    + list(_PUBLIC_TYPES) + list(_BUILTINS) + list(_INTRINSICS)
)
