"""enigma's attention prefill on CUDA beside torch's scaled_dot_product_attention
(its flash and cuDNN backends), in the same run on the same GPU.

Runs the ``attention_cuda`` binary (built where cargo is, carried here) twice:

1. **Correctness against torch.** Random ``q, k, v`` made here with torch
   (f16 and bf16; sequence lengths 1, 37/100, 100/37, 1000; head dims 64 and
   128; grouped-query heads; no mask, torch's ``is_causal`` (top-left) and
   ``causal_lower_right``) go to the binary as raw files (``attention_cuda
   io DIR``); its outputs and log-sum-exps are compared with torch's SDPA
   computed in f32 from the same inputs (math backend; rows that see no key
   are zeros and ``-inf`` in enigma, NaN in torch, and are checked apart).
2. **Speed.** ``attention_cuda bench`` times enigma (CUDA-event device
   time of the dispatch, median of the repeats; the library's plan, marked
   ``*``, and for f16 every tile and stage count) and checks 32 sampled rows
   against an f64 reference; here torch's SDPA is timed on the same shapes
   with ``sdpa_kernel`` pinned to the flash backend, then to cuDNN (CUDA
   events, median of 20 after 5 warm-ups, the GPU held first so the time is
   the device's own).

FLOP counts are ``4·D·(query, key) pairs the mask keeps`` for everyone (a
causal run does about half the work of the same shape without a mask).

Usage::

    python3 bench/attention_vs_torch.py path/to/attention_cuda [--out DIR]
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import median_seconds

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}

# (name, shape [b, h, hkv, sq, skv, d], mask)
CASES = [
    ("s1_d64", [1, 2, 2, 1, 1, 64], "none"),
    ("s1000_d128", [2, 4, 4, 1000, 1000, 128], "none"),
    ("s1000_d128_causal", [2, 4, 4, 1000, 1000, 128], "top_left"),
    ("gqa_32_8_causal", [1, 32, 8, 300, 300, 64], "top_left"),
    ("sq37_skv100_top_left", [1, 4, 2, 37, 100, 64], "top_left"),
    ("sq37_skv100_bottom_right", [1, 4, 2, 37, 100, 128], "bottom_right"),
    ("sq100_skv37_bottom_right", [1, 4, 4, 100, 37, 64], "bottom_right"),
    ("s7_d128_causal", [3, 2, 1, 7, 7, 128], "top_left"),
]


def reference(q, k, v, mask, scale):
    """torch's SDPA in f32 (math backend) with K/V heads repeated for GQA,
    and the log-sum-exp of each row's scaled visible scores."""
    b, h, sq, d = q.shape
    group = h // k.shape[1]
    qf, kf, vf = q.float(), k.float().repeat_interleave(group, 1), v.float().repeat_interleave(group, 1)
    skv = kf.shape[2]
    keep = torch.ones(sq, skv, dtype=torch.bool, device=q.device)
    if mask == "top_left":
        keep = keep.tril()
    elif mask == "bottom_right":
        keep = keep.tril(diagonal=skv - sq)
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=keep, scale=scale)
    scores = (qf @ kf.transpose(-1, -2)) * scale
    lse = scores.masked_fill(~keep, float("-inf")).logsumexp(-1)
    return out, lse, keep.any(-1)


def check(binary, dtype_name):
    dtype = DTYPES[dtype_name]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases, inputs = [], {}
        gen = torch.Generator(device="cuda").manual_seed(0)
        for name, (b, h, hkv, sq, skv, d), mask in CASES:
            q = torch.randn(b, h, sq, d, device="cuda", dtype=dtype, generator=gen)
            k = torch.randn(b, hkv, skv, d, device="cuda", dtype=dtype, generator=gen)
            v = torch.randn(b, hkv, skv, d, device="cuda", dtype=dtype, generator=gen)
            scale = d ** -0.5
            for ext, t in (("q", q), ("k", k), ("v", v)):
                t.contiguous().view(torch.uint8).cpu().numpy().tofile(os.path.join(tmp, f"{name}.{ext}"))
            cases.append({"name": name, "dtype": dtype_name, "shape": [b, h, hkv, sq, skv, d], "mask": mask, "scale": scale})
            inputs[name] = (q, k, v, mask, scale)
        with open(os.path.join(tmp, "cases.json"), "w") as f:
            json.dump(cases, f)
        run = subprocess.run([binary, "io", tmp], capture_output=True, text=True)
        sys.stderr.write(run.stderr)
        run.check_returncode()
        result = json.loads(run.stdout)
        for row in result["rows"]:
            name = row["name"]
            if "error" in row:
                print(f"  {dtype_name} {name}: enigma error: {row['error']}")
                failures += 1
                continue
            q, k, v, mask, scale = inputs[name]
            want, want_lse, seen = reference(q, k, v, mask, scale)
            raw = torch.from_numpy(np.fromfile(os.path.join(tmp, f"{name}.out"), dtype="uint8"))
            got = raw.view(dtype).reshape(q.shape).cuda().float()
            got_lse = torch.from_numpy(np.fromfile(os.path.join(tmp, f"{name}.lse"), dtype="float32")).cuda().reshape(want_lse.shape)
            rows = seen.expand_as(want_lse)
            err = (got - want)[rows].abs().max().item() if rows.any() else 0.0
            lse_err = (got_lse - want_lse)[rows].abs().max().item() if rows.any() else 0.0
            unseen_ok = bool((got[~rows] == 0).all()) and bool(torch.isneginf(got_lse[~rows]).all())
            # The same inputs through torch's own f16/bf16 kernel, for scale.
            group = q.shape[1] // k.shape[1]
            kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device="cuda")
            keep = keep.tril() if mask == "top_left" else keep.tril(diagonal=k.shape[2] - q.shape[2]) if mask == "bottom_right" else keep
            torch_out = F.scaled_dot_product_attention(q, kr, vr, attn_mask=keep, scale=scale).float()
            torch_err = (torch_out - want)[rows].abs().max().item() if rows.any() else 0.0
            bound = 4 * (2 ** -11 if dtype == torch.float16 else 2 ** -8)
            ok = err <= bound * max(1.0, want.abs().max().item()) and lse_err <= 1e-3 and unseen_ok
            failures += not ok
            print(f"  {dtype_name} {name:<28} max |out - ref| {err:.2e} (torch {dtype_name} SDPA: {torch_err:.2e}); "
                  f"max |lse - ref| {lse_err:.2e}; rows with no key {'ok' if unseen_ok else 'WRONG'}  {'ok' if ok else 'FAILED'}")
    return failures


def torch_time(q, k, v, causal, backend):
    try:
        with sdpa_kernel(backend):
            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
            fn()
            return median_seconds(fn, reps=20, warmup=5, held=True)
    except RuntimeError as e:
        return str(e).splitlines()[0]


def main():
    binary = sys.argv[1]
    out_dir = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print("correctness against torch SDPA (f32 math reference):")
    failures = sum(check(binary, d) for d in DTYPES)
    print(f"{failures} cases failed")
    run = subprocess.run([binary, "bench"], capture_output=True, text=True)
    sys.stderr.write(run.stderr)
    run.check_returncode()
    enigma = json.loads(run.stdout)
    if "skipped" in enigma:
        print("benchmark skipped:", enigma["skipped"])
        return
    table, torch_times = [], {}
    for r in enigma["rows"]:
        if "error" in r:
            print(f"{r['dtype']} {r['shape']} causal={r['causal']} {r.get('kernel', '')}: enigma error: {r['error']}")
            continue
        b, h, hkv, sq, skv, d = r["shape"]
        key = (r["dtype"], tuple(r["shape"]), r["causal"])
        if key not in torch_times:
            t = DTYPES[r["dtype"]]
            q = torch.randn(b, h, sq, d, device="cuda", dtype=t)
            k = torch.randn(b, hkv, skv, d, device="cuda", dtype=t)
            v = torch.randn(b, hkv, skv, d, device="cuda", dtype=t)
            torch_times[key] = (torch_time(q, k, v, r["causal"], SDPBackend.FLASH_ATTENTION), torch_time(q, k, v, r["causal"], SDPBackend.CUDNN_ATTENTION))
            del q, k, v
        flash, cudnn = torch_times[key]
        row = {**r, "flash_us": flash * 1e6 if isinstance(flash, float) else flash, "cudnn_us": cudnn * 1e6 if isinstance(cudnn, float) else cudnn}
        table.append(row)
        tf = lambda s: f"{r['flops'] / s / 1e12:6.1f}" if isinstance(s, float) else "  n/a"  # noqa: E731
        ratio = lambda s: f"{s / (r['median_us'] / 1e6):5.2f}x" if isinstance(s, float) else "  n/a"  # noqa: E731
        mark = "*" if r.get("default") else " "
        print(f"{r['dtype']:>4} B{b} H{h} S{sq} D{d} {'causal' if r['causal'] else 'full  '} {mark}{r['kernel']:<46}: {r['median_us']:8.1f} us {r['tflops']:6.1f} TFLOP/s"
              f" | flash {tf(flash)} (enigma {ratio(flash)} its speed) | cuDNN {tf(cudnn)} (enigma {ratio(cudnn)})"
              f" | sampled rows: {r['sampled_failures']} off, max error {r['max_abs_error']:.1e}")
    if out_dir:
        with open(os.path.join(out_dir, "attention_vs_torch.json"), "w") as f:
            json.dump({"device": enigma["device"], "torch": torch.__version__, "rows": table, "check_failures": failures}, f, indent=1)


if __name__ == "__main__":
    main()
