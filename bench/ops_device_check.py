"""Checks, on a CUDA GPU, the ``enigma.ops`` paths of the running sums and
products over a leading or middle axis (by chunks of the axis and by a
thread per column), the depthwise ``conv2d`` (by rows of 16-byte words and
by tiles) and the f32 element-wise functions against float64 references
computed by torch, at awkward shapes, for float32, float16 and bfloat16.
Prints one line per case and ``ALL OK`` or the number of failures.

    PYTHONPATH=<enigma package> python3 bench/ops_device_check.py
"""
import torch
import torch.nn.functional as F
import enigma.ops as ops

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
UNIT = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
failures = 0


def report(what, err, bound):
    global failures
    ok = err <= bound
    failures += not ok
    print(f"{what:<60} max err {err:.3e} (bound {bound:.3e}) {'ok' if ok else 'FAILED'}")


def rand(shape, dt, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device="cuda", dtype=torch.float64) * (hi - lo) + lo).to(dt)


def running(name, dt, shape, dim, product):
    x = rand(shape, DTYPES[dt], 1 - 1 / 256, 1 + 1 / 256) if product else rand(shape, DTYPES[dt])
    got = (ops.cumprod(x, dim) if product else ops.cumsum(x, dim)).double()
    ref = torch.cumprod(x.double(), dim) if product else torch.cumsum(x.double(), dim)
    scale = torch.cumsum(x.double().abs(), dim) if not product else ref.abs()
    err = float(((got - ref).abs() / (scale + 1e-30)).max())
    # f32 accumulation (a sum of n terms: n·2^-24 at worst) rounded once.
    report(f"{name} {dt} {list(shape)} dim={dim}", err, UNIT[dt] * 1.01 + 2.0 ** -24 * shape[dim] * 4)


def depthwise(dt, n, c, h, w, k, p, mult=1, bias=True):
    x = rand((n, c, h, w), DTYPES[dt])
    wt = rand((c * mult, 1, k[0], k[1]), DTYPES[dt])
    b = rand((c * mult,), DTYPES[dt]) if bias else None
    got = ops.conv2d(x, wt, b, 1, p, 1, c).double()
    ref = F.conv2d(x.double(), wt.double(), b.double() if bias else None, 1, p, 1, c)
    scale = F.conv2d(x.double().abs(), wt.double().abs(), b.double().abs() if bias else None, 1, p, 1, c)
    err = float(((got - ref).abs() / (scale + 1e-30)).max())
    report(f"conv2d depthwise {dt} {[n, c, h, w]} k{k} p{p} x{mult} bias={bias}", err, UNIT[dt] * 1.01 + 2.0 ** -24 * k[0] * k[1] * 2)


def elementwise(n):
    x = rand((n,), torch.float32, -4.0, 4.0)
    pos = rand((n,), torch.float32, 1e-3, 8.0)
    cases = [
        ("log", pos, ops.log, torch.log),
        ("exp", x, ops.exp, torch.exp),
        ("sigmoid", x, ops.sigmoid, torch.sigmoid),
        ("gelu erf", x, ops.gelu, F.gelu),
        ("gelu tanh", x, lambda v: ops.gelu(v, "tanh"), lambda v: F.gelu(v, approximate="tanh")),
    ]
    for name, v, mine, theirs in cases:
        got, ref, torch_f32 = mine(v), theirs(v.double()), theirs(v)
        err = float(((got.double() - ref).abs() / (ref.abs() * 2e-6 + 1e-6)).max())
        ulps = int((got.view(torch.int32).long() - torch_f32.view(torch.int32).long()).abs().max())
        report(f"{name} f32 n={n} (max {ulps} ulp from torch's f32)", err, 1.0)


torch.manual_seed(0)
for dt in DTYPES:
    for product in (False, True):
        name = "cumprod" if product else "cumsum"
        for shape, dim in [((1000, 8), 0), ((257, 2, 36), 0), ((3, 1000, 37), 1), ((70, 1100), 0), ((64, 7, 13), 1), ((1, 5), 0), ((1000, 3), 0), ((8192, 8192), 0)]:
            running(name, dt, shape, dim, product)
    for args in [(2, 4, 7, 16, (3, 3), 1), (2, 2, 9, 24, (5, 3), (2, 1), 2), (1, 3, 5, 12, (3, 5), (1, 2)), (3, 5, 33, 40, (3, 3), 1), (64, 64, 32, 32, (3, 3), 1), (2, 3, 10, 20, (3, 3), 1)]:
        for bias in (False, True):
            depthwise(dt, *args, bias=bias)
for n in (1, 7, 1030, 1 << 20, (1 << 20) + 5):
    elementwise(n)
print("ALL OK" if failures == 0 else f"{failures} FAILED")
