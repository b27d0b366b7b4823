"""Kernels: what ``@enigma.kernel`` returns.

:class:`Kernel` wraps the decorated function. It keeps the function (which
is never called), its IR once compiled (``enigma._compile`` compiles the
source on first use, so names the kernel reads from its module may be
defined after it; once per rank of the arrays that give buffers their
shapes) and its compilations by specialisation values and ranks.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Hashable, Optional


class Kernel:
    """A kernel function decorated with ``@enigma.kernel``.

    Calling it from Python is an error: pass it to :func:`enigma.compile`.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TypeError(f"@enigma.kernel decorates a Python function, not {type(fn).__name__}")
        self.fn = fn
        self.name: str = fn.__name__
        #: The IR's JSON form as a dict, once compiled from the source (for
        #: arrays passed for shapes, of the ranks its body implies).
        self.ir: Optional[Dict[str, Any]] = None
        #: The front end's results by the ranks of the arrays that give
        #: buffers their shapes: ``{ranks: (IR dict, ArrayShape records)}``.
        self.by_ranks: Dict[Hashable, Any] = {}
        #: Compilations by specialisation values (``enigma.compile``'s cache).
        self.compiled: Dict[Hashable, Any] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"kernel `{self.name}` runs on a device: compile it with enigma.compile({self.name}) and "
            "run it with enigma.MetalRuntime().execute(...)"
        )

    def __repr__(self) -> str:
        return f"<enigma.kernel {self.name}>"


def kernel(fn: Callable[..., Any]) -> Kernel:
    """Decorator: marks ``fn`` as a kernel written in enigma's Python subset.

    Args:
        fn: the kernel function; its source is read, it is never called.

    Returns:
        the :class:`Kernel`, for :func:`enigma.compile`.
    """
    return Kernel(fn)
