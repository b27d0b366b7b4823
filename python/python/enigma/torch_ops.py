"""``enigma.ops`` as PyTorch custom operators, for ``torch.compile`` graphs.

Importing this module (torch needed) registers the operations of
:mod:`enigma.ops` that take and give tensors as ``torch.ops.enigma.*``
through ``torch.library.custom_op``, each with a fake (meta)
implementation that gives its result's shape, dtype and device without
running it. A compiled graph then keeps them as opaque calls: ``dynamo``
traces through them without a graph break, ``aot_eager`` and inductor call
them as they are (inductor as external kernels)::

    import torch, enigma.torch_ops

    def block(x, w, g, b):
        h = torch.ops.enigma.gelu(torch.ops.enigma.matmul(x, w))
        return torch.ops.enigma.layer_norm(h, [h.shape[-1]], g, b)

    y = torch.compile(block)(x, w, g, b)      # CUDA tensors: enigma's CUDA kernels

CUDA tensors run on the GPU, on torch's current stream; CPU tensors on
enigma's simulator (``device="sim"``). Inputs that are not contiguous are
made so first (``.contiguous()``). The operators are functional (each
gives a new tensor and changes none); they have no autograd formula, so
they serve inference graphs (a tensor that requires grad is refused by
torch). Their semantics are :mod:`enigma.ops`'s, which differ from torch's
where ``docs/library.md`` says: reductions give float32, argmax/argmin
int32.

The operators and their schemas (``List[int]`` arguments take lists):
relu, silu, sigmoid, exp, log ``(x)``; gelu ``(x, approximate="none")``;
scale ``(x, factor)``; add, mul, div ``(a, b)``; sum, mean, amax, amin
``(x, dim=None, keepdim=False)``; argmax, argmin ``(x, dim=None,
keepdim=False)``; cumsum, cumprod ``(x, dim)``; softmax, log_softmax ``(x,
dim=-1)``; rms_norm ``(x, normalized_shape, weight=None, eps=1e-5)``;
layer_norm ``(x, normalized_shape, weight=None, bias=None, eps=1e-5)``;
matmul, bmm ``(a, b)``; cross_entropy ``(input, target, ignore_index=-100,
reduction="mean")``; max_pool2d ``(x, kernel_size, stride, padding)``;
avg_pool2d ``(x, kernel_size, stride, padding, count_include_pad=True)``;
conv2d ``(input, weight, bias, stride, padding, dilation, groups=1)``;
scaled_dot_product_attention ``(q, k, v, is_causal=False, scale=None)``.
"""
from typing import List, Optional

import torch

from . import ops as _ops

__all__ = ["OPERATORS"]

#: The names of the operators registered under ``torch.ops.enigma``.
OPERATORS: List[str] = []


def _device(op: str, *tensors: torch.Tensor) -> str:
    """enigma's device for tensors all on one torch device: ``"cuda"`` or
    the simulator for CPU tensors."""
    kinds = {t.device.type for t in tensors}
    if len(kinds) != 1:
        raise RuntimeError(f"enigma::{op}: tensors on more than one device ({', '.join(sorted(kinds))})")
    kind = kinds.pop()
    if kind == "cuda":
        return "cuda"
    if kind == "cpu":
        return "sim"
    raise RuntimeError(f"enigma::{op}: enigma runs torch tensors on CUDA or (through its simulator) on the CPU, not on {kind}")


def _c(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous()


def _register(name: str, fake, real):
    """``real`` as the operator ``enigma::name`` with ``fake`` as its fake
    implementation."""
    op = torch.library.custom_op(f"enigma::{name}", real, mutates_args=())
    op.register_fake(fake)
    OPERATORS.append(name)
    return op


def _like_x(x: torch.Tensor, *_args) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _f32(x: torch.Tensor, shape) -> torch.Tensor:
    return x.new_empty(list(shape), dtype=torch.float32)


# ----- element-wise -------------------------------------------------------

def _unary(name: str):
    fn = getattr(_ops, name)

    def real(x: torch.Tensor) -> torch.Tensor:
        return fn(_c(x), device=_device(name, x))
    real.__name__ = name
    return _register(name, _like_x, real)


relu, silu, sigmoid, exp, log = (_unary(n) for n in ("relu", "silu", "sigmoid", "exp", "log"))


def _gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return _ops.gelu(_c(x), approximate, device=_device("gelu", x))


gelu = _register("gelu", lambda x, approximate="none": _like_x(x), _gelu)


def _scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return _ops.scale(_c(x), factor, device=_device("scale", x))


scale = _register("scale", lambda x, factor: _like_x(x), _scale)


def _binary(name: str):
    fn = getattr(_ops, name)

    def real(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return fn(_c(a), _c(b), device=_device(name, a, b))
    real.__name__ = name

    def fake(a, b):
        return a.new_empty(torch.broadcast_shapes(a.shape, b.shape))
    return _register(name, fake, real)


add, mul, div = (_binary(n) for n in ("add", "mul", "div"))


# ----- over axes ----------------------------------------------------------

def _reduced(shape, dim, keepdim: bool) -> List[int]:
    """The shape of a reduction of ``shape`` over ``dim`` (None: all)."""
    nd = len(shape)
    axes = set(range(nd)) if dim is None or len(dim) == 0 else {d % max(nd, 1) for d in dim}
    if keepdim:
        return [1 if i in axes else s for i, s in enumerate(shape)]
    return [s for i, s in enumerate(shape) if i not in axes]


def _reduction(name: str, enigma_name: str):
    fn = getattr(_ops, enigma_name)

    def real(x: torch.Tensor, dim: Optional[List[int]] = None, keepdim: bool = False) -> torch.Tensor:
        axes = None if dim is None or len(dim) == 0 else tuple(dim)
        out = fn(_c(x), axes, keepdim, device=_device(name, x))
        return out.clone() if out.dim() == 0 else out
    real.__name__ = name

    def fake(x, dim=None, keepdim=False):
        return _f32(x, _reduced(x.shape, dim, keepdim))
    return _register(name, fake, real)


sum_, mean, amax, amin = (_reduction(n, e) for n, e in (("sum", "sum"), ("mean", "mean"), ("amax", "max"), ("amin", "min")))


def _arg(name: str):
    fn = getattr(_ops, name)

    def real(x: torch.Tensor, dim: Optional[int] = None, keepdim: bool = False) -> torch.Tensor:
        out = fn(_c(x), dim, keepdim, device=_device(name, x))
        return out.clone() if out.dim() == 0 else out
    real.__name__ = name

    def fake(x, dim=None, keepdim=False):
        shape = _reduced(x.shape, None if dim is None else [dim], keepdim)
        if dim is None and keepdim:
            shape = [1] * x.dim()
        return x.new_empty(shape, dtype=torch.int32)
    return _register(name, fake, real)


argmax, argmin = _arg("argmax"), _arg("argmin")


def _along(name: str, default_dim: Optional[int]):
    fn = getattr(_ops, name)
    if default_dim is None:
        def real(x: torch.Tensor, dim: int) -> torch.Tensor:
            return fn(_c(x), dim, device=_device(name, x))

        def fake(x, dim):
            return _like_x(x)
    else:
        def real(x: torch.Tensor, dim: int = -1) -> torch.Tensor:  # type: ignore[misc]
            return fn(_c(x), dim, device=_device(name, x))

        def fake(x, dim=-1):  # type: ignore[misc]
            return _like_x(x)
    real.__name__ = name
    return _register(name, fake, real)


cumsum, cumprod = _along("cumsum", None), _along("cumprod", None)
softmax, log_softmax = _along("softmax", -1), _along("log_softmax", -1)


def _rms_norm(x: torch.Tensor, normalized_shape: List[int], weight: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    given = [x] + ([weight] if weight is not None else [])
    return _ops.rms_norm(_c(x), tuple(normalized_shape), None if weight is None else _c(weight), eps=eps,
                         device=_device("rms_norm", *given))


rms_norm = _register("rms_norm", lambda x, normalized_shape, weight=None, eps=1e-5: _like_x(x), _rms_norm)


def _layer_norm(x: torch.Tensor, normalized_shape: List[int], weight: Optional[torch.Tensor] = None,
                bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    given = [x] + [t for t in (weight, bias) if t is not None]
    return _ops.layer_norm(_c(x), tuple(normalized_shape), None if weight is None else _c(weight),
                           None if bias is None else _c(bias), eps=eps, device=_device("layer_norm", *given))


layer_norm = _register("layer_norm", lambda x, normalized_shape, weight=None, bias=None, eps=1e-5: _like_x(x), _layer_norm)


# ----- products, losses, windows -------------------------------------------

def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _ops.matmul(_c(a), _c(b), device=_device("matmul", a, b))


def _matmul_shape(a, b) -> List[int]:
    row, column = a.dim() == 1, b.dim() == 1
    batch = list(a.shape[:-2]) if a.dim() > 2 else []
    return batch + ([] if row else [a.shape[-2]]) + ([] if column else [b.shape[-1]])


matmul = _register("matmul", lambda a, b: a.new_empty(_matmul_shape(a, b)), _matmul)


def _bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _ops.bmm(_c(a), _c(b), device=_device("bmm", a, b))


bmm = _register("bmm", lambda a, b: a.new_empty([a.shape[0], a.shape[1], b.shape[2]]), _bmm)


def _cross_entropy(input: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,  # noqa: A002 - torch's name
                   reduction: str = "mean") -> torch.Tensor:
    out = _ops.cross_entropy(_c(input), _c(target), ignore_index=ignore_index, reduction=reduction,
                             device=_device("cross_entropy", input, target))
    return out.clone() if out.dim() == 0 else out


def _cross_entropy_fake(input, target, ignore_index=-100, reduction="mean"):  # noqa: A002
    return _f32(input, target.shape if reduction == "none" else [])


cross_entropy = _register("cross_entropy", _cross_entropy_fake, _cross_entropy)


def _window(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _pool_fake(x, kernel_size, stride, padding, count_include_pad=True):
    step = stride if stride else kernel_size
    h, w = (_window(x.shape[-2 + i], kernel_size[i], step[i], padding[i]) for i in range(2))
    return x.new_empty(list(x.shape[:-2]) + [h, w])


def _max_pool2d(x: torch.Tensor, kernel_size: List[int], stride: List[int], padding: List[int]) -> torch.Tensor:
    return _ops.max_pool2d(_c(x), tuple(kernel_size), tuple(stride) if stride else None, tuple(padding),
                           device=_device("max_pool2d", x))


max_pool2d = _register("max_pool2d", _pool_fake, _max_pool2d)


def _avg_pool2d(x: torch.Tensor, kernel_size: List[int], stride: List[int], padding: List[int],
                count_include_pad: bool = True) -> torch.Tensor:
    return _ops.avg_pool2d(_c(x), tuple(kernel_size), tuple(stride) if stride else None, tuple(padding),
                           count_include_pad, device=_device("avg_pool2d", x))


avg_pool2d = _register("avg_pool2d", _pool_fake, _avg_pool2d)


def _conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: List[int],  # noqa: A002
            padding: List[int], dilation: List[int], groups: int = 1) -> torch.Tensor:
    given = [input, weight] + ([bias] if bias is not None else [])
    return _ops.conv2d(_c(input), _c(weight), None if bias is None else _c(bias), tuple(stride), tuple(padding),
                       tuple(dilation), groups, device=_device("conv2d", *given))


def _conv2d_fake(input, weight, bias, stride, padding, dilation, groups=1):  # noqa: A002
    h, w = (_window(input.shape[-2 + i], weight.shape[2 + i], stride[i], padding[i], dilation[i]) for i in range(2))
    return input.new_empty(list(input.shape[:-3]) + [weight.shape[0], h, w])


conv2d = _register("conv2d", _conv2d_fake, _conv2d)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
          scale: Optional[float] = None) -> torch.Tensor:
    return _ops.scaled_dot_product_attention(_c(q), _c(k), _c(v), causal=is_causal, scale=scale,
                                             device=_device("scaled_dot_product_attention", q, k, v))


scaled_dot_product_attention = _register("scaled_dot_product_attention",
                                         lambda q, k, v, is_causal=False, scale=None: _like_x(q), _sdpa)
