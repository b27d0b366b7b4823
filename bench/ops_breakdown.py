"""Per-kernel device time of enigma.ops calls at the bench shapes of
`library_vs_torch.py --ops` (the products and the convolutions), beside
torch's (cuBLAS, cuDNN with TF32 off), from torch.profiler's CUDA activity
(CUPTI sees every kernel of the process, enigma's driver launches
included); then, for each call, its held CUDA-event time (the device's own,
`cuda_timing.median_seconds(held=True)`) beside the sum of its kernels, so
that time outside the kernels (gaps, copies) shows.

    python3 bench/ops_breakdown.py [f16|bf16|f32 ...] [name-filter ...]
"""
import sys

import torch
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity

import enigma.ops as ops
from cuda_timing import median_seconds

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def calls(dt):
    """(name, enigma call, torch call) on random CUDA tensors of ``dt``."""
    r = lambda *s: torch.rand(*s, device="cuda", dtype=torch.float32).to(dt)
    sq, sq2 = r(4096, 4096), r(4096, 4096)
    a3, b3, a_fold, w = r(32, 1024, 1024), r(32, 1024, 1024), r(8, 512, 1024), r(1024, 1024)
    img, cw, cb, dw, pw = r(64, 64, 32, 32), r(64, 64, 3, 3) - 0.5, r(64), r(64, 1, 3, 3), r(128, 64, 1, 1)
    return [
        ("matmul 4096", lambda: ops.matmul(sq, sq2), lambda: torch.matmul(sq, sq2)),
        ("bmm 32x1024", lambda: ops.bmm(a3, b3), lambda: torch.bmm(a3, b3)),
        ("matmul [8,512,1024]@[1024,1024]", lambda: ops.matmul(a_fold, w), lambda: torch.matmul(a_fold, w)),
        ("conv2d dense", lambda: ops.conv2d(img, cw, cb, 1, 1), lambda: F.conv2d(img, cw, cb, 1, 1)),
        ("conv2d depthwise", lambda: ops.conv2d(img, dw, None, 1, 1, 1, 64), lambda: F.conv2d(img, dw, None, 1, 1, 1, 64)),
        ("conv2d pointwise", lambda: ops.conv2d(img, pw), lambda: F.conv2d(img, pw)),
    ]


def main():
    args = sys.argv[1:]
    types = [a for a in args if a in DTYPES] or ["f16"]
    filters = [a for a in args if a not in DTYPES]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in types:
        for op, mine, theirs in calls(DTYPES[name]):
            if filters and not any(f in op for f in filters):
                continue
            for f in (mine, theirs):
                for _ in range(3):
                    f()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                for _ in range(10):
                    mine()
                    theirs()
                torch.cuda.synchronize()
            print(f"== {op} {name} (10 calls of each; enigma's kernels and torch's)")
            print(p.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60))
            held_mine, held_theirs = median_seconds(mine, held=True), median_seconds(theirs, held=True)
            print(f"held: enigma {held_mine * 1e6:.1f} us, torch {held_theirs * 1e6:.1f} us")


if __name__ == "__main__":
    main()
