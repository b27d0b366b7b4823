"""The bilinear resize of ``examples/resize.py`` on CUDA beside PyTorch.

Runs the ``texture_cuda`` binary (built where cargo is, carried here), which
checks each resize against an f64 reference and times the kernel's launch
(CUDA events; median of the repeats; the runtime's per-dispatch copies of the
textures into and out of CUDA arrays are not in that figure, ``wall us`` is
the whole dispatch seen from the host). Then times, with CUDA events (median
of 50 after 5 warm-ups), the same resize in torch
(``F.interpolate(mode="bilinear", align_corners=False)``, whose sample
positions are the same pixel centres):

* ``torch f32``: an f32 NCHW image in and out (one kernel; 4x the bytes);
* ``torch u8``: the rgba8 image in and out as enigma has it (HWC uint8 → f32
  NCHW → interpolate → rounded back to uint8: several kernels).

GB/s count each image's bytes once (source read, result written). Usage:

    python3 bench/texture_vs_torch.py path/to/texture_cuda [texture_cuda flags ...]
"""
import json
import subprocess
import sys

import torch
import torch.nn.functional as F

from cuda_timing import median_seconds


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    run = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)
    sys.stderr.write(run.stderr)
    report = json.loads(run.stdout)
    if "skipped" in report:
        sys.exit(f"texture_cuda skipped: {report['skipped']}")
    print(f"device: {report['device']} (torch {torch.__version__})")
    print(f"{'resize':<24} {'enigma us':>10} {'GB/s':>6} {'wall us':>8} {'diff':>4} "
          f"{'torch f32 us':>12} {'torch u8 us':>11} {'vs f32':>7} {'vs u8':>6}")
    for row in report["rows"]:
        (w, h), (ow, oh) = row["from"], row["to"]
        image = torch.randint(0, 256, (h, w, 4), dtype=torch.uint8, device="cuda")
        x32 = image.permute(2, 0, 1)[None].float().contiguous()

        def f32():
            return F.interpolate(x32, size=(oh, ow), mode="bilinear", align_corners=False)

        def u8():
            x = image.permute(2, 0, 1)[None].float()
            y = F.interpolate(x, size=(oh, ow), mode="bilinear", align_corners=False)
            return y.round_().clamp_(0, 255).to(torch.uint8)[0].permute(1, 2, 0).contiguous()

        t32 = median_seconds(f32, reps=50) * 1e6
        t8 = median_seconds(u8, reps=50) * 1e6
        t = row["median_us"]
        print(f"{w}x{h} -> {ow}x{oh}".ljust(24) + f" {t:10.1f} {row['gbps']:6.0f} {row['wall_us']:8.0f} {row['max_diff']:4d} "
              f"{t32:12.1f} {t8:11.1f} {t32 / t:6.2f}x {t8 / t:5.2f}x")


if __name__ == "__main__":
    main()
