"""The kernel library on CUDA beside PyTorch and plain Triton, in one run.

Runs the `library_cuda` binary (built where cargo is, carried here), which
checks each library operation at its benchmark shape against an f64 reference
and times it (CUDA events around each dispatch, median of 20). Then times the
same operation in torch (and, for softmax, RMSNorm and sum, in a plain Triton
kernel written the way a Triton user would: one row or block per program) on
data of the same shape and type, with CUDA events, median of 20 after 5
warm-ups, and prints a table with ratios. Usage:

    python3 bench/library_vs_torch.py path/to/library_cuda [option ...] [name-filter[@shape] ...]

(the options and filters are `library_cuda`'s).

With ``--ops`` among the arguments, only the second table below runs, its
rows filtered by the filters given (all rows without any); with
``--library``, only the first.

Then, where the ``enigma`` Python package is installed, a second table: the
``enigma.ops`` calls that take torch's conventions (``dim=``, trailing
``normalized_shape``, batch dimensions) on torch CUDA tensors beside the
same torch calls, both timed held (``median_seconds(held=True)``: device
time, the Python call queued while the GPU spins), each result checked
against torch's.
"""
import json
import subprocess
import sys

import torch
import torch.nn.functional as F

from cuda_timing import median_seconds

try:
    import triton
    import triton.language as tl
except ImportError:  # the table then has no Triton column
    triton = None

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "float": torch.float32, "half": torch.float16, "bfloat": torch.bfloat16,
          "i32": torch.int32, "int": torch.int32, "u32": torch.int32, "uint": torch.int32}


if triton is not None:
    @triton.jit
    def _softmax_row(x_ptr, y_ptr, d, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < d
        x = tl.load(x_ptr + row * d + cols, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        y = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * d + cols, y.to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _rms_norm_row(x_ptr, w_ptr, y_ptr, d, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < d
        x = tl.load(x_ptr + row * d + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(x * x, axis=0) / d + eps)
        tl.store(y_ptr + row * d + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _sum_blocks(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def triton_op(name, shape, dt):
    """A plain Triton kernel for softmax, RMSNorm and sum, or None."""
    if triton is None:
        return None
    if name.startswith("softmax_") and "online" not in name:
        rows, d = shape
        x = torch.randn(rows, d, device="cuda", dtype=dt)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(d)
        return lambda: _softmax_row[(rows,)](x, y, d, BLOCK=block, num_warps=16)
    if name.startswith("rms_norm_"):
        rows, d = shape
        x = torch.randn(rows, d, device="cuda", dtype=dt)
        w = torch.rand(d, device="cuda", dtype=dt) + 0.5
        y = torch.empty_like(x)
        block = triton.next_power_of_2(d)
        return lambda: _rms_norm_row[(rows,)](x, w, y, d, 1e-5, BLOCK=block, num_warps=16)
    if name.startswith("sum_") and "rows" not in name:
        (n,) = shape
        x = torch.rand(n, device="cuda", dtype=dt)
        out = torch.zeros(1, device="cuda", dtype=torch.float32)
        block = 4096

        def run():
            out.zero_()
            _sum_blocks[(triton.cdiv(n, block),)](x, out, n, BLOCK=block, num_warps=8)
        return run
    return None


def torch_op(name, shape, dt):
    """The torch operation equivalent to a library entry, or None."""
    def rand(*s):
        return torch.rand(*s, device="cuda", dtype=torch.float32).to(dt) if dt.is_floating_point else \
            torch.randint(0, 100, s, device="cuda", dtype=dt)
    base = name.rsplit("_", 1)[0]
    if base in ("scale", "scale_vec4"):
        x, y = rand(*shape), torch.empty(shape, device="cuda", dtype=dt)
        return lambda: torch.mul(x, 0.75, out=y)
    if base in ("add", "mul"):
        a, b, y = rand(*shape), rand(*shape), torch.empty(shape, device="cuda", dtype=dt)
        f = torch.add if base == "add" else torch.mul
        return lambda: f(a, b, out=y)
    if base == "relu":
        x, y = rand(*shape), torch.empty(shape, device="cuda", dtype=dt)
        return lambda: torch.clamp_min(x, 0, out=y)
    if base == "silu":
        x = rand(*shape)
        return lambda: F.silu(x)
    if base == "gelu":
        x = rand(*shape)
        return lambda: F.gelu(x, approximate="tanh")
    if base == "gelu_erf":
        x = rand(*shape)
        return lambda: F.gelu(x)
    if base in ("sigmoid", "exp", "log"):
        x, y = rand(*shape), torch.empty(shape, device="cuda", dtype=dt)
        f = {"sigmoid": torch.sigmoid, "exp": torch.exp, "log": torch.log}[base]
        return lambda: f(x, out=y)
    if base in ("sum", "max", "min"):
        x = rand(*shape)
        f = {"sum": torch.sum, "max": torch.amax, "min": torch.amin}[base]
        return lambda: f(x)
    if base in ("sum_rows", "max_rows", "min_rows"):
        x = rand(*shape)
        f = {"sum_rows": torch.sum, "max_rows": torch.amax, "min_rows": torch.amin}[base]
        return lambda: f(x, dim=1)
    if name.startswith("prefix_sum_"):
        x = rand(*shape)
        return lambda: torch.cumsum(x, 0)
    if base in ("cumsum_axis", "cumprod_axis"):
        x = rand(*shape)
        f = torch.cumsum if base == "cumsum_axis" else torch.cumprod
        return lambda: f(x, 1)
    if base in ("conv2d", "conv2d_pointwise"):
        b, ci, co, h, w = shape
        side, pad = (3, 1) if base == "conv2d" else (1, 0)
        x, wt, bias = rand(b, ci, h, w), rand(co, ci, side, side), rand(co)
        return lambda: F.conv2d(x, wt, bias, 1, pad)
    if base == "conv2d_depthwise":
        b, c, h, w = shape
        x, wt, bias = rand(b, c, h, w), rand(c, 1, 3, 3), rand(c)
        return lambda: F.conv2d(x, wt, bias, 1, 1, 1, c)
    if base in ("softmax", "softmax_online"):
        x = rand(*shape)
        return lambda: torch.softmax(x, dim=1)
    if base == "rms_norm":
        rows, d = shape
        x, w = rand(rows, d), rand(d)
        return lambda: F.rms_norm(x, (d,), w, 1e-5)
    if base == "layer_norm":
        rows, d = shape
        x, w, b = rand(rows, d), rand(d), rand(d)
        return lambda: F.layer_norm(x, (d,), w, b, 1e-5)
    if base == "gemv":
        m, k = shape
        w, x = rand(m, k), rand(k)
        return lambda: torch.mv(w, x)
    if base in ("attention_decode", "attention_decode_fused"):
        h, s, d = shape
        q, k, v = rand(1, h, 1, d), rand(1, h, s, d), rand(1, h, s, d)
        return lambda: F.scaled_dot_product_attention(q, k, v)
    if base in ("attention_decode_batch", "attention_decode_ragged"):
        # Whole sequences for torch (the ragged entry's odd sequences are
        # shorter in enigma's run); K/V copies spanning 200 MB, one per call
        # in turn, as the registry's entry rotates its own, so that both
        # read the cache from DRAM.
        b, hq, hkv, s, d = shape
        q = rand(b, hq, 1, d)
        cache = 2 * b * hkv * s * d * q.element_size()
        copies = max(1, min(64, -(-(200 << 20) // cache)))
        kvs = [(rand(b, hkv, s, d), rand(b, hkv, s, d)) for _ in range(copies)]
        turn = [0]

        def run():
            k, v = kvs[turn[0] % copies]
            turn[0] += 1
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hkv)
        return run
    return None


def peak_tbs():
    """The device's DRAM bandwidth in TB/s and where it comes from: its
    memory clock and bus width (double data rate) where torch reports them,
    else a device-to-device copy of 1 GiB timed in this run."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz = getattr(props, "memory_clock_rate", 0)
    bus_bits = getattr(props, "memory_bus_width", 0)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    seconds = median_seconds(lambda: dst.copy_(src))
    print(f"device-to-device copy of 1 GiB: {2 * src.numel() / seconds / 1e12:.2f} TB/s (read + write, measured)")
    if clock_khz and bus_bits:
        return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e12, "memory clock x bus width"
    return 2 * src.numel() / seconds / 1e12, "a 1 GiB copy, measured"


def main():
    binary, filters = sys.argv[1], [a for a in sys.argv[2:] if a not in ("--ops", "--library")]
    if "--ops" in sys.argv[2:]:
        conventions(filters)
        return
    # cuDNN's convolutions in f32 without TF32, as the library computes them.
    torch.backends.cudnn.allow_tf32 = False
    out = subprocess.run([binary, *filters], check=True, capture_output=True, text=True).stdout
    enigma = json.loads(out)
    if "skipped" in enigma:
        print("library benchmark skipped:", enigma["skipped"])
        return
    print(f"device: {enigma['device']} (torch {torch.__version__}"
          f"{', triton ' + triton.__version__ if triton else ''})")
    peak, source = peak_tbs()
    print(f"peak DRAM bandwidth: {peak:.2f} TB/s ({source}); % peak is enigma's TB/s over it")
    header = f"{'kernel':<30}{'shape':<18}{'enigma':>10}{'TB/s':>7}{'torch':>10}{'% torch':>9}{'triton':>10}{'% triton':>9}{'% peak':>8}  check"
    print(header)
    results = []
    for row in enigma["rows"]:
        name, shape = row["name"], row["shape"]
        if "error" in row:
            print(f"{name:<30}{str(shape):<18} error: {row['error'][:150]}")
            continue
        dt = DTYPES.get(name.rsplit("_", 1)[1], torch.float32)
        t_enigma = row["median_us"] / 1e6
        fn = torch_op(name, shape, dt)
        t_torch = median_seconds(fn) if fn else None
        tfn = triton_op(name, shape, dt)
        t_triton = median_seconds(tfn) if tfn else None
        bw = row["tb_per_s"]
        pct = lambda t: f"{100 * t / t_enigma:8.1f}%" if t else f"{'-':>9}"
        us = lambda t: f"{t * 1e6:8.1f}us" if t else f"{'-':>10}"
        check = "ok" if row["passed"] else f"FAILED ({row['failures']} elements)"
        print(f"{name:<30}{'x'.join(map(str, shape)):<18}{us(t_enigma)}{bw:7.3f}{us(t_torch)}{pct(t_torch)}"
              f"{us(t_triton)}{pct(t_triton)}{100 * bw / peak:7.1f}%  {check}")
        results.append({**row, "torch_us": t_torch and t_torch * 1e6, "triton_us": t_triton and t_triton * 1e6})
    print("(% torch and % triton: their time over enigma's, so above 100% means enigma is faster)")
    with open("library_vs_torch.json", "w") as f:
        json.dump(results, f, indent=1)
    if "--library" not in sys.argv[2:]:
        conventions(filters)


def convention_rows(dt):
    """(name, shape, enigma call, torch call) of the operations with torch's
    conventions, on random CUDA tensors of ``dt``."""
    import enigma.ops as ops

    def rand(*s):
        return torch.rand(*s, device="cuda", dtype=torch.float32).to(dt)
    x3, rows, chans = rand(32, 1024, 1024), rand(8192, 8192), rand(32, 256, 1024)
    a3, b3, w = rand(32, 1024, 1024), rand(32, 1024, 1024), rand(1024, 1024)
    a_fold = rand(8, 512, 1024)
    img, wn, bn = rand(64, 64, 32, 32), rand(32, 32), rand(32, 32)
    small = (rand(4096, 4096) * 0.01 + 1).contiguous()
    col, vec = rand(8192, 1), rand(1024)
    labels = torch.randint(0, 8192, (8192,), device="cuda")
    cw, cb, dw, pw = rand(64, 64, 3, 3) - 0.5, rand(64), rand(64, 1, 3, 3), rand(128, 64, 1, 1)
    wd, bd = rand(8192), rand(8192)
    flat, flat2, vec_long = rand(1 << 24), rand(1 << 24), rand(1 << 26) * 1e-3
    pos = rows + 0.5
    sq, sq2 = rand(4096, 4096), rand(4096, 4096)
    return [
        ("sum dim=1", x3, lambda: ops.sum(x3, 1), lambda: torch.sum(x3, 1, dtype=torch.float32)),
        ("mean dim=1", x3, lambda: ops.mean(x3, 1), lambda: torch.mean(x3, 1)),
        ("max dim=1", x3, lambda: ops.max(x3, 1), lambda: torch.amax(x3, 1)),
        ("argmax dim=1", x3, lambda: ops.argmax(x3, 1), lambda: torch.argmax(x3, 1)),
        ("argmax dim=-1", rows, lambda: ops.argmax(rows, -1), lambda: torch.argmax(rows, -1)),
        ("argmin dim=1", x3, lambda: ops.argmin(x3, 1), lambda: torch.argmin(x3, 1)),
        ("argmin dim=-1", rows, lambda: ops.argmin(rows, -1), lambda: torch.argmin(rows, -1)),
        ("softmax dim=1", chans, lambda: ops.softmax(chans, 1), lambda: torch.softmax(chans, 1)),
        ("log_softmax dim=-1", rows, lambda: ops.log_softmax(rows, -1), lambda: torch.log_softmax(rows, -1)),
        ("log_softmax dim=1", chans, lambda: ops.log_softmax(chans, 1), lambda: torch.log_softmax(chans, 1)),
        ("cumsum dim=-1", rows, lambda: ops.cumsum(rows, -1), lambda: torch.cumsum(rows, -1)),
        ("cumsum dim=0", rows, lambda: ops.cumsum(rows, 0), lambda: torch.cumsum(rows, 0)),
        ("cumprod dim=1", small, lambda: ops.cumprod(small, 1), lambda: torch.cumprod(small, 1)),
        ("layer_norm (32, 32)", img, lambda: ops.layer_norm(img, (32, 32), wn, bn), lambda: F.layer_norm(img, (32, 32), wn, bn, 1e-5)),
        ("rms_norm (32, 32)", img, lambda: ops.rms_norm(img, (32, 32), wn), lambda: F.rms_norm(img, (32, 32), wn, 1e-5)),
        ("bmm", a3, lambda: ops.bmm(a3, b3), lambda: torch.bmm(a3, b3)),
        ("matmul [8,512,1024]@[1024,1024]", a_fold, lambda: ops.matmul(a_fold, w), lambda: torch.matmul(a_fold, w)),
        ("mul [8192,8192]*[8192,1]", rows, lambda: ops.mul(rows, col), lambda: torch.mul(rows, col)),
        ("add [32,1024,1024]+[1024]", x3, lambda: ops.add(x3, vec), lambda: torch.add(x3, vec)),
        ("div [8192,8192]/[8192,1]", rows, lambda: ops.div(rows, col + 1), lambda: torch.div(rows, col + 1)),
        ("cross_entropy [8192,8192]", rows, lambda: ops.cross_entropy(rows, labels), lambda: F.cross_entropy(rows, labels)),
        ("max_pool2d 3 s2 p1", img, lambda: ops.max_pool2d(img, 3, 2, 1), lambda: F.max_pool2d(img, 3, 2, 1)),
        ("avg_pool2d 2", img, lambda: ops.avg_pool2d(img, 2), lambda: F.avg_pool2d(img, 2)),
        ("conv2d 64->64 3x3 p1 (cuDNN, TF32 off)", img, lambda: ops.conv2d(img, cw, cb, 1, 1), lambda: F.conv2d(img, cw, cb, 1, 1)),
        ("conv2d depthwise 3x3 (cuDNN, TF32 off)", img, lambda: ops.conv2d(img, dw, None, 1, 1, 1, 64), lambda: F.conv2d(img, dw, None, 1, 1, 1, 64)),
        ("conv2d pointwise 64->128 (cuDNN, TF32 off)", img, lambda: ops.conv2d(img, pw), lambda: F.conv2d(img, pw)),
        # The element-wise operations added with torch's names, through enigma.ops.
        ("sigmoid", rows, lambda: ops.sigmoid(rows), lambda: torch.sigmoid(rows)),
        ("exp", rows, lambda: ops.exp(rows), lambda: torch.exp(rows)),
        ("log", pos, lambda: ops.log(pos), lambda: torch.log(pos)),
        ("gelu erf", rows, lambda: ops.gelu(rows), lambda: F.gelu(rows)),
        ("gelu tanh", rows, lambda: ops.gelu(rows, "tanh"), lambda: F.gelu(rows, approximate="tanh")),
        # Last-axis shapes of the operations that gained axes, batches or
        # broadcasting, at the registry's benchmark shapes, so each sits
        # beside its row kernel's figure in the first table ("before": the
        # same kernel dispatched without the Python layer).
        ("last axis: sum dim=-1", rows, lambda: ops.sum(rows, -1), lambda: torch.sum(rows, -1, dtype=torch.float32)),
        ("last axis: max dim=-1", rows, lambda: ops.max(rows, -1), lambda: torch.amax(rows, -1)),
        ("last axis: sum_rows (old form)", rows, lambda: ops.sum_rows(rows), lambda: torch.sum(rows, -1, dtype=torch.float32)),
        ("last axis: softmax dim=-1", rows, lambda: ops.softmax(rows, -1), lambda: torch.softmax(rows, -1)),
        ("last axis: rms_norm (8192,)", rows, lambda: ops.rms_norm(rows, (8192,), wd), lambda: F.rms_norm(rows, (8192,), wd, 1e-5)),
        ("last axis: layer_norm (8192,)", rows, lambda: ops.layer_norm(rows, (8192,), wd, bd), lambda: F.layer_norm(rows, (8192,), wd, bd, 1e-5)),
        ("last axis: add same shape", flat, lambda: ops.add(flat, flat2), lambda: torch.add(flat, flat2)),
        ("last axis: matmul 2-D 4096", sq, lambda: ops.matmul(sq, sq2), lambda: torch.matmul(sq, sq2)),
        ("last axis: cumsum 1-D", vec_long, lambda: ops.cumsum(vec_long, 0), lambda: torch.cumsum(vec_long, 0)),
    ]


def conventions(filters):
    """The second table (module docstring); skipped without ``enigma``."""
    try:
        import enigma.ops  # noqa: F401
    except ImportError:
        print("enigma.ops conventions: skipped (the enigma package is not installed)")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"{'enigma.ops call':<34}{'dtype':<7}{'shape':<18}{'enigma':>10}{'torch':>10}{'% torch':>9}  check")
    results = []
    for name in ("f32", "f16", "bf16"):
        dt = DTYPES[name]
        for op, x, mine, theirs in convention_rows(dt):
            if filters and not any(f in op for f in filters):
                continue
            got, want = mine(), theirs()
            if got.dtype != want.dtype:
                want = want.to(got.dtype)
            tol = {"f32": 1e-3, "f16": 1e-2, "bf16": 5e-2}[name]
            if op.startswith("cum") and name != "f32":
                tol = 0.2  # torch accumulates half types in their own type
            ok = torch.allclose(got.float(), want.float(), rtol=tol, atol=tol * (1 + float(want.float().abs().mean())))
            t_mine, t_theirs = median_seconds(mine, held=True), median_seconds(theirs, held=True)
            shape = "x".join(map(str, x.shape))
            print(f"{op:<34}{name:<7}{shape:<18}{t_mine * 1e6:8.1f}us{t_theirs * 1e6:8.1f}us{100 * t_theirs / t_mine:8.1f}%  {'ok' if ok else 'DIFFERS'}")
            results.append({"op": op, "dtype": name, "shape": list(x.shape), "enigma_us": t_mine * 1e6, "torch_us": t_theirs * 1e6, "agrees": ok})
    print("(% torch: torch's time over enigma's; TF32 off (cuDNN convolutions too). enigma's reductions give float32, argmax int32: compared as such)")
    with open("ops_conventions_vs_torch.json", "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
