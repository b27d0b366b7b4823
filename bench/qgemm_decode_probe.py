"""What the quantized GEMM on cooperative tensors would gain from changes the
code generator cannot make yet: the hand-written kernels of
``qgemm_decode_probe.cu`` (the library's loop, INT4 ``[K/8][N]`` or fragment
order, group 128) on N = 11008, K = 4096 at 16, 64 and 128 rows, beside
``torch.matmul`` in f16, all in one run:

* ``decode``: ``slot`` decodes each weight alone in f32 (as the library's
  kernel does), ``pairs`` two K-adjacent weights per f16-pair operation from
  one byte of a word, ``fragments`` the same from fragment-ordered words;
* ``whole``: the copies test no bounds.

Each figure is the kernel alone (the K split's partial products, not their
sum, which the library adds as a second dispatch), weights rotated over
copies spanning 200 MB so every call reads DRAM, held (``median_seconds``),
median of 20; every configuration is checked against the f32 product of A
and the dequantized weights. The helpers are the prelude of the CUDA source
``enigma emit`` prints for a library kernel; the kernels are compiled with
nvcc for sm_90a (ptxas's warnings about serialised wgmma are printed).

Usage::

    python3 bench/qgemm_decode_probe.py path/to/enigma
"""

import os
import subprocess
import sys
import tempfile

import cupy as cp
import numpy as np
import torch

from cuda_timing import median_seconds

HERE = os.path.dirname(os.path.abspath(__file__))
N, K, GROUP, STAGES = 11008, 4096, 128, 4
ROTATION_BYTES = 200 << 20
DECODES = {"slot": 0, "pairs": 1, "fragments": 2}


def prelude(enigma):
    """enigma's CUDA helpers for sm_90a: a library kernel's source up to it."""
    cmd = [enigma, "emit", "--target", "cuda", "--cuda-arch", "sm_90a", "--by-kernel-name", "qgemm_coop_int4_f16_64x64x64_s2_r8"]
    src = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return src[: src.index('extern "C" __global__')]


def issue_function(tm):
    """One wgmma m64n{tm}k16 (f16, f32 accumulate), the left operand from four
    registers of f16 pairs, the right one (A's staged slice) K-major,
    scale-d from an operand."""
    regs = tm // 2
    dest = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return (
        f"__device__ __forceinline__ void probe_wgmma(float* d, const unsigned* a, unsigned long long b, unsigned scale_d)\n{{\n"
        f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 5}, 0;\\n"\n'
        f'        "wgmma.mma_async.sync.aligned.m64n{tm}k16.f32.f16.f16 {{{dest}}}, {{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, 1, 1, 0;\\n}}\\n"\n'
        f'        : {outs}\n        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d) : "memory");\n}}\n'
        "#define ISSUE probe_wgmma\n"
    )


def compile_variant(helpers, workdir, tm, decode, whole):
    name = f"tm{tm}_{decode}_w{whole}"
    src = os.path.join(workdir, name + ".cu")
    with open(src, "w") as f:
        f.write(helpers + issue_function(tm) + open(os.path.join(HERE, "qgemm_decode_probe.cu")).read())
    cubin = os.path.join(workdir, name + ".cubin")
    defines = [f"-DTM={tm}", f"-DSTAGES={STAGES}", f"-DDECODE={DECODES[decode]}", f"-DWHOLE={whole}"]
    out = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v", *defines, "-o", cubin, src], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    serialised = "C7515" in out.stderr or "serialized" in out.stderr
    return cp.RawModule(path=cubin).get_function("qgemm_probe"), serialised


def fragment_positions():
    """For each nibble of the fragment-ordered words, the element of the
    ``K × N`` weights it holds (units of 64 K x 16 N, 128 words: word 4l + q
    of a unit holds, at nibble h + 2·half + 4·p, row 16q + 8h + 2(l % 4) + p
    and column 8·half + l / 4), as flat indices, ``[words][8]``."""
    uk, un, lane, q, i = torch.meshgrid(*(torch.arange(x, device="cuda") for x in (K // 64, N // 16, 32, 4, 8)), indexing="ij")
    h, half, p = i % 2, (i // 2) % 2, i // 4
    k = 64 * uk + 16 * q + 8 * h + 2 * (lane % 4) + p
    n = 16 * un + 8 * half + lane // 4
    return (k * N + n).reshape(-1, 8)


def fragment_order(words, positions):
    """``[K/8][N]`` words in fragment order."""
    nib = torch.stack([(words >> (4 * j)) & 0xF for j in range(8)], dim=1).reshape(-1).long()
    shifts = 4 * torch.arange(8, device="cuda")
    packed = (nib[positions] << shifts).sum(dim=1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def dequantized(words, scales):
    nib = torch.stack([(words >> (4 * j)) & 0xF for j in range(8)], dim=1).reshape(K, N)
    return ((nib.float() - 8.0) * scales.float().repeat_interleave(GROUP, dim=0)).half()


def main():
    helpers = prelude(sys.argv[1])
    torch.manual_seed(0)
    copies = -(-ROTATION_BYTES // (K * N // 2))
    words = [torch.randint(-(2**31), 2**31 - 1, (K // 8, N), dtype=torch.int32, device="cuda") for _ in range(copies)]
    scales = [(torch.rand(K // GROUP, N, device="cuda") * 0.01 + 0.005).half() for _ in range(copies)]
    positions = fragment_positions()
    fragments = [fragment_order(w, positions) for w in words]
    del positions
    w0 = dequantized(words[0], scales[0]).float()
    variants = [("slot", 0), ("slot", 1), ("pairs", 0), ("pairs", 1), ("fragments", 1)]
    print(f"{'M':>4} {'decode':>10} {'whole':>5} {'splits':>6} {'us':>8}  notes")
    with tempfile.TemporaryDirectory() as workdir:
        for tm, splits in [(16, 3), (64, 3), (128, 2)]:
            a = (torch.randn(tm, K, device="cuda") * 0.5).half()
            want = a.float() @ w0
            for decode, whole in variants:
                fn, serialised = compile_variant(helpers, workdir, tm, decode, whole)
                smem = STAGES * (tm * 64 * 2 + 8 * 64 * 4 + 2 * 64 * 2)
                fn.max_dynamic_shared_size_bytes = smem
                c = torch.zeros(splits, tm, N, device="cuda")
                b = fragments if decode == "fragments" else words

                def launch(i):
                    args = (a.data_ptr(), b[i].data_ptr(), c.data_ptr(), np.uint32(tm), np.uint32(N), np.uint32(K), np.uint32(GROUP), scales[i].data_ptr(), np.uint32(splits))
                    fn((N // 64, 1, splits), (128, 1, 1), args, shared_mem=smem)

                launch(0)
                torch.cuda.synchronize()
                err = ((c.sum(0) - want).abs() / (want.abs() + 1.0)).max().item()
                seconds = median_seconds(launch, copies=list(range(copies)), held=True)
                notes = f"{fn.num_regs} registers, max error {err:.1e}" + (" WRONG" if err > 1e-3 else "") + (", wgmma serialised by ptxas" if serialised else "")
                print(f"{tm:>4} {decode:>10} {whole:>5} {splits:>6} {seconds * 1e6:8.2f}  {notes}", flush=True)
            f16 = [dequantized(words[i], scales[i]) for i in range(3)]
            seconds = median_seconds(lambda w: torch.matmul(a, w), copies=f16, held=True)
            print(f"{tm:>4} {'torch.matmul f16':>25} {seconds * 1e6:8.2f}", flush=True)


if __name__ == "__main__":
    main()
