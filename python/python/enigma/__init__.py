"""enigma: GPU compute kernels in the Metal execution model, from Python.

Write a kernel as a decorated Python function in enigma's kernel language (a
subset of Python); enigma reads its source (the function is never called),
compiles it to enigma's IR, validates it, and runs it on the CPU simulator
(``"sim"``, the default where no GPU is present, with an optional
sanitizer), CUDA or Metal::

    import numpy as np
    import enigma

    @enigma.kernel
    def add_one(A: enigma.f32, Out: enigma.f32):
        tid = enigma.thread_position_in_grid
        Out[tid] = A[tid] + 1.0

    rt = enigma.MetalRuntime()              # rt.device: "sim", "cuda" or "metal"
    out = rt.execute(enigma.compile(add_one), inputs=[np.ones(64, np.float32)],
                     output_size=64 * 4, grid=(64, 1, 1), threads=(32, 1, 1))
    np.frombuffer(out, np.float32)          # 64 × 2.0

Compiled kernels also run on arrays in place: ``enigma.compile(add_one)(a,
out, grid=64, threads=32)``. :mod:`enigma.ops` runs the kernel library
(softmax, norms, GEMM, quantized matmul …) on arrays.

The kernel language — parameters and their annotations, statements,
expressions, builtins, every function (``enigma.simd_sum``, ``enigma.exp``,
``enigma.fast.exp``, ``enigma.precise.sin`` …), textures, threadgroup memory, atomics — is
described in docs/language.md (cooperative tensor operations, Metal 4's
``matmul2d`` under MetalPerformancePrimitives' names, in
docs/cooperative-tensors.md); each name here has its own docstring
(``help(enigma.simd_shuffle_down)``). Errors are all :class:`EnigmaError`:
:class:`CompileError`, :class:`DispatchError` (with its subclass
:class:`DeviceError`) and :class:`SanitizerError`.
"""

import typing as _typing

from . import _enigma
from . import _lang
from . import fast as fast
from . import ops as ops
from . import precise as precise
from ._compile import CompiledKernel as CompiledKernel
from ._cooperative import dynamic_extent as dynamic_extent
from ._cooperative import execution_simdgroup as execution_simdgroup
from ._cooperative import execution_simdgroups as execution_simdgroups
from ._cooperative import matmul2d as matmul2d
from ._cooperative import matmul2d_descriptor as matmul2d_descriptor
from ._cooperative import PUBLIC as _COOPERATIVE
from ._cooperative import tensor as tensor
from ._cooperative import CooperativeTensor as CooperativeTensor
from ._cooperative import TensorView as TensorView
from ._compile import compile as compile
from ._compile import compile_ir as compile_ir
from ._devices import Texture as Texture
from ._devices import asarray as asarray
from ._devices import empty as empty
from ._devices import synchronize as synchronize
from ._enigma import Array as Array
from ._enigma import CompileError as CompileError
from ._enigma import DeviceError as DeviceError
from ._enigma import DispatchError as DispatchError
from ._enigma import EnigmaError as EnigmaError
from ._enigma import SanitizerError as SanitizerError
from ._kernel import Kernel as Kernel
from ._kernel import kernel as kernel
from ._lang import buffer as buffer
from ._lang import constant as constant
from ._lang import sampler as sampler
from ._lang import texture2d as texture2d
from ._language import *  # noqa: F403 - the kernel language's names, listed in its __all__
from ._language import __all__ as _LANGUAGE_NAMES
from ._runtime import MetalRuntime as MetalRuntime
from ._types import PUBLIC_TYPES as _PUBLIC_TYPES
from ._types import DType as DType
from ._types import MatrixType as MatrixType
from ._types import simdgroup_matrix as simdgroup_matrix
from .ops import tune as tune

__version__: str = _enigma.__version__

# A name the front end registers (enigma._lang, enigma._types) without a
# declaration in enigma._language still works in kernels;
# python/tests/test_kernel_language.py fails until it is declared there.
for _name, _marker in {**_PUBLIC_TYPES, **_lang.BUILTINS, **_lang.INTRINSICS}.items():
    globals().setdefault(_name, _marker)

#: Infinity and NaN as kernel constants (``x = -enigma.inf``); ``math.inf``,
#: ``float("inf")`` and ``float("nan")`` are read the same way.
inf: float = float("inf")
nan: float = float("nan")

# numpy's (and torch's) names of the scalar types, for the error that
# suggests enigma's.
_NUMPY_NAMES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f32 (there is no f64)",
    "double": "f32 (there is no f64)", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool_",
}


# Type checkers do not see it, so they report a misspelt name.
if not _typing.TYPE_CHECKING:
    def __getattr__(name: str) -> object:
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
    {"Array", "CompileError", "CompiledKernel", "DType", "DeviceError", "DispatchError", "EnigmaError", "Kernel",
     "MatrixType", "MetalRuntime", "SanitizerError", "Texture", "asarray", "buffer", "compile", "compile_ir", "constant",
     "empty", "fast", "inf", "kernel", "nan", "ops", "precise", "sampler", "simdgroup_matrix", "synchronize", "texture2d", "tune"}
    | set(_LANGUAGE_NAMES) | set(_PUBLIC_TYPES) | set(_lang.BUILTINS) | set(_lang.INTRINSICS) | set(_COOPERATIVE)
)
