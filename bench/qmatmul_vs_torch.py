"""The quantized matmul on CUDA beside PyTorch's FP16 matmul and its INT4
weight-only kernel, at decode shapes (K = 4096, N = 11008, M = 1 and 16 by
default).

Runs the `qmatmul_cuda` binary (built where cargo is, carried here), which
checks each enigma configuration against an f64 reference and times it with
the weights rotated over enough copies to span 200 MB (four times the H100's
50 MB L2), so every call reads its weights from DRAM. Then times, the same
way (CUDA events, median of the repeats after 5 warm-ups, one weight copy per
call, copies rotated; held, so that the time is the device's own, and also
launched from an idle GPU, which adds the host's launch latency):

* ``torch.matmul`` of f16 ``A [M, K]`` and f16 ``W [K, N]`` (the unquantized
  baseline: 4x the weight bytes);
* ``torch._weight_int4pack_mm`` (tinygemm, INT4 with bf16 scales and zeros
  per group of 128) on bf16 ``A``, its weights packed by
  ``torch._convert_weight_to_int4pack`` (uint8 ``[N, K/2]`` input on recent
  torch, int32 ``[N, K]`` on older).

Prints a table: enigma's best correct configuration per format and M, its
hot-L2 time, and the torch times, with the bytes each must read. Usage:

    python3 bench/qmatmul_vs_torch.py path/to/qmatmul_cuda [qmatmul_cuda flags ...]
    python3 bench/qmatmul_vs_torch.py path/to/qmatmul_cuda --m 1,16 --threads 256,512 --cols 2,4 --words 8
    python3 bench/qmatmul_vs_torch.py path/to/qmatmul_cuda --m 1 --threads 128,256 --cols 1,2,4 --words 8 --splits auto,1,2,3,4,6,8
"""
import json
import subprocess
import sys

import torch

from cuda_timing import median_seconds

ROTATION_BYTES = 200 << 20
REPEATS = 50


def n_copies(bytes_each):
    return max(2, -(-ROTATION_BYTES // bytes_each))


def timings(fn, copies):
    """(held, launched) median seconds: the device's own time, and the time
    from an idle GPU's start event, which includes the launch latency."""
    return (median_seconds(fn, reps=REPEATS, copies=copies, held=True),
            median_seconds(fn, reps=REPEATS, copies=copies))


def torch_fp16(m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    copies = [torch.randn(k, n, device="cuda", dtype=torch.float16) for _ in range(n_copies(k * n * 2))]
    fn = lambda w: torch.matmul(a, w)  # noqa: E731
    return timings(fn, copies), k * n * 2 + m * k * 2 + m * n * 2


def int4pack(k, n, inner_k_tiles=8):
    """One weight for ``_weight_int4pack_mm``: random 4-bit codes packed by
    torch itself (the uint8 form first, then the older int32 form)."""
    codes = torch.randint(0, 16, (n, k), device="cuda", dtype=torch.int32)
    try:
        u8 = ((codes[:, ::2] << 4) | codes[:, 1::2]).to(torch.uint8)
        return torch._convert_weight_to_int4pack(u8, inner_k_tiles)
    except (RuntimeError, TypeError):
        return torch._convert_weight_to_int4pack(codes, inner_k_tiles)


def torch_int4(m, n, k, group=128):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    bytes_each = k * n // 2 + k // group * n * 2 * 2
    copies = []
    for _ in range(n_copies(bytes_each)):
        scales_zeros = torch.rand(k // group, n, 2, device="cuda", dtype=torch.bfloat16) * 0.01
        copies.append((int4pack(k, n), scales_zeros))
    fn = lambda c: torch._weight_int4pack_mm(a, c[0], group, c[1])  # noqa: E731
    return timings(fn, copies), bytes_each + m * k * 2 + m * n * 2


def us(t):
    return f"{t * 1e6:9.2f}" if t is not None else "        -"


def main():
    binary, flags = sys.argv[1], sys.argv[2:]
    out = subprocess.run([binary, *flags], check=True, capture_output=True, text=True).stdout
    enigma = json.loads(out)
    if "skipped" in enigma:
        print("qmatmul benchmark skipped:", enigma["skipped"])
        return
    rows = enigma["rows"]
    errors = [r for r in rows if "error" in r]
    for r in errors:
        print(f"enigma {r['format']} m={r['m']} threads={r['threads']} cols={r['cols']} words={r['words']} splits={r['splits_asked']}: {r['error'][:150]}")
    wrong = [r for r in rows if "error" not in r and not r["passed"]]
    for r in wrong:
        print(f"enigma {r['format']} m={r['m']} threads={r['threads']} cols={r['cols']} words={r['words']} splits={r['splits']}: WRONG ({r['failures']} failures, max abs error {r['max_abs_error']:.3g})")
    good = [r for r in rows if "error" not in r and r["passed"]]
    print(f"device: {enigma['device']} (torch {torch.__version__}, {torch.cuda.get_device_name()})")
    print("every configuration (enigma, weights rotated / hot in L2, us):")
    for r in good:
        print(f"  {r['format']:<5} m={r['m']:<3} threads={r['threads']:<5} cols={r['cols']} words={r['words']:<3} splits={r['splits']:<3} {r['median_us']:8.2f}  {r['hot_median_us']:8.2f}  {r['tb_per_s']:.2f} TB/s  {r['kernel']}")
    shapes = sorted({(r["m"], r["n"], r["k"], r["group"]) for r in rows})
    print()
    print(f"{'shape (MxNxK, group)':<26}{'kernel':<40}{'us':>9}{'hot us':>9}{'launched':>9}{'MB read':>9}{'TB/s':>7}")
    for (m, n, k, group) in shapes:
        label = f"{m}x{n}x{k} g{group}"
        for fmt in ("fp4", "int4"):
            cands = [r for r in good if r["format"] == fmt and (r["m"], r["n"], r["k"], r["group"]) == (m, n, k, group)]
            if not cands:
                continue
            b = min(cands, key=lambda r: r["median_us"])
            shape_of = f"t{b['threads']} c{b['cols']} u{b['words']}" if b["variant"] == "decode" else b.get("tile", "auto")
            name = f"enigma {fmt} {b['variant']} ({shape_of} s{b['splits']})"
            print(f"{label:<26}{name:<40}{b['median_us']:9.2f}{b['hot_median_us']:9.2f}{b['launched_median_us']:9.2f}{b['bytes'] / 1e6:9.1f}{b['tb_per_s']:7.2f}")
        (t, launched), nbytes = torch_fp16(m, n, k)
        print(f"{label:<26}{'torch.matmul f16':<40}{us(t)}{'':>9}{us(launched)}{nbytes / 1e6:9.1f}{nbytes / t / 1e12:7.2f}")
        try:
            (t, launched), nbytes = torch_int4(m, n, k, group)
            print(f"{label:<26}{'torch._weight_int4pack_mm bf16':<40}{us(t)}{'':>9}{us(launched)}{nbytes / 1e6:9.1f}{nbytes / t / 1e12:7.2f}")
        except (RuntimeError, AttributeError, TypeError) as e:
            print(f"{label:<26}{'torch._weight_int4pack_mm':<40} unavailable: {str(e).splitlines()[0][:90]}")
    print("(us: median device time of the call's kernels run back to back, the GPU held until they were queued, weights read from DRAM;")
    print(" hot us: the same, enigma re-reading one copy from L2; launched: timed from an idle GPU's start event, which adds the launch latency)")


if __name__ == "__main__":
    main()
