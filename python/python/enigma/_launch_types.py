"""What a launch binds, apart from the modules that make it: a kernel
parameter (:class:`Param`), and what :func:`enigma._launch.launch` needs of
a compiled kernel (:class:`LaunchableKernel`, which
:class:`enigma.CompiledKernel` is) and of a runtime
(:class:`DispatchRuntime`, which :class:`enigma.MetalRuntime` is). The
compiler, the launcher and the runtime all import this module, and it
imports none of them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from ._types import DType


class Param:
    """One kernel parameter: a device buffer, a by-value scalar or a texture."""

    __slots__ = ("index", "name", "kind", "type_name", "scalar", "width", "elem_bytes", "access")

    def __init__(self, index: int, name: str, kind: str, type_name: str, scalar: str, width: int, elem_bytes: int,
                 access: Optional[str]) -> None:
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

    def __repr__(self) -> str:
        extra = f", {self.access}" if self.access else ""
        return f"Param({self.index}, {self.name!r}, {self.kind}, {self.type_name}{extra})"


class LaunchableKernel(Protocol):
    """What a launch needs of a compiled kernel."""

    params: List[Param]

    @property
    def name(self) -> str: ...

    @property
    def native(self) -> Any: ...

    def for_arrays(self, args: Sequence[Any]) -> Tuple[LaunchableKernel, List[int]]: ...


class DispatchRuntime(Protocol):
    """What a launch needs of a runtime: its dispatch settings, the native
    runtime it dispatches on, and where it records each dispatch's report."""

    sanitize: bool
    max_loop_iterations: Optional[int]
    timeout: Optional[float]

    @property
    def native(self) -> Any: ...

    def begin_dispatch(self) -> None: ...

    def end_dispatch(self, report: Dict[str, Any]) -> None: ...
