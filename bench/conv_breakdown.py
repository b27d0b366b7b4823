"""Per-kernel device time of enigma.ops.conv2d calls at the bench shapes,
beside cuDNN's, from torch.profiler's CUDA activity (CUPTI sees every kernel
of the process, enigma's driver launches included)."""
import torch
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
import enigma.ops as ops

torch.backends.cudnn.allow_tf32 = False
for dt in (torch.float32, torch.float16):
    r = lambda *s: torch.rand(*s, device="cuda", dtype=torch.float32).to(dt)
    img, cw, cb, dw, pw = r(64, 64, 32, 32), r(64, 64, 3, 3) - 0.5, r(64), r(64, 1, 3, 3), r(128, 64, 1, 1)
    calls = {
        "dense": (lambda: ops.conv2d(img, cw, cb, 1, 1), lambda: F.conv2d(img, cw, cb, 1, 1)),
        "depthwise": (lambda: ops.conv2d(img, dw, None, 1, 1, 1, 64), lambda: F.conv2d(img, dw, None, 1, 1, 1, 64)),
        "pointwise": (lambda: ops.conv2d(img, pw), lambda: F.conv2d(img, pw)),
    }
    for name, (mine, theirs) in calls.items():
        for f in (mine, theirs):
            for _ in range(3):
                f()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(10):
                mine()
                theirs()
            torch.cuda.synchronize()
        print(f"== {name} {dt} (10 calls of each; enigma's kernels and cuDNN's)")
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60))
