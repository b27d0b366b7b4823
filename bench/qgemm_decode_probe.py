"""What the quantized GEMM on cooperative tensors would gain from changes the
code generator cannot make yet: the hand-written kernels of
``qgemm_decode_probe.cu`` (the library's loop, INT4 ``[K/8][N]`` or fragment
order, group 128) on N = 11008, K = 4096 at 16, 64 and 128 rows, beside
``torch.matmul`` in f16, all in one run:

* ``decode``: ``slot`` decodes each weight alone in f32 (as the library's
  kernel does), ``pairs`` two K-adjacent weights per f16-pair operation from
  one byte of a word, ``fragments`` the same from fragment-ordered words;
* ``whole``: the copies test no bounds.

``--parts`` times the fragment-order kernel's loop in parts instead, at 16,
64 and 128 rows with 3 K splits (the library's), 64 columns of weights per
threadgroup (one warpgroup; three stages at 128 rows, so that four
threadgroups fit a compute unit and the grid is one wave) and, at 64 and 128
rows, 128 columns (two warpgroups sharing each stage of A, the library's
tile at 128 rows, four stages): the whole loop, without the
decode (constant weights), without the product (the decoded pairs folded into
a register), and with neither (the copies and barriers alone), each also with
a producer warp issuing the copies (``PRODUCER``). Only the whole loop
computes the product, so only it is checked. ``--overlap`` times the whole loop
and the loop without the decode with and without one product kept in flight
across the next slice's decode (``OVERLAP`` in the kernels' source).
``--cluster`` times the whole loop with the K splits' partial tiles written to
the workspace (to be summed by a second dispatch) against the splits of a
tile as one thread-block cluster summing them through distributed shared
memory into f16 C in the same dispatch (``CLUSTER_SUM``), each with and
without the product kept in flight.

Each figure is the kernel alone (the K split's partial products, not their
sum, which the library adds as a second dispatch; the cluster rows include
the sum and write C), weights rotated over
copies spanning 200 MB so every call reads DRAM, held (``median_seconds``),
median of 20; every configuration is checked against the f32 product of A
and the dequantized weights. The helpers are the prelude of the CUDA source
``enigma emit`` prints for a library kernel; the kernels are compiled with
nvcc for sm_90a (ptxas's warnings about serialised wgmma are printed).

Usage::

    python3 bench/qgemm_decode_probe.py path/to/enigma [--parts | --overlap | --cluster]
"""

import os
import subprocess
import sys
import tempfile
from collections import namedtuple

import cupy as cp
import numpy as np
import torch

from cuda_timing import median_seconds

HERE = os.path.dirname(os.path.abspath(__file__))
N, K, GROUP = 11008, 4096, 128
ROTATION_BYTES = 200 << 20
DECODES = {"slot": 0, "pairs": 1, "fragments": 2, "none": 3}
# The kernel's compile-time choices (the header of qgemm_decode_probe.cu).
Variant = namedtuple("Variant", "decode whole product producer overlap cluster", defaults=(1, 1, 0, 0, 0))
# The splits the cluster sum takes (CLUSTER_SPLITS in the kernel).
CLUSTER_SPLITS = 3
# What each mode runs: its variants and shapes (rows, K splits, stages,
# columns of weights per threadgroup).
MODES = {
    "--parts": (
        [Variant(d, product=p, producer=q) for q in (0, 1) for d, p in (("fragments", 1), ("none", 1), ("fragments", 0), ("none", 0))],
        [(16, 3, 4, 64), (64, 3, 4, 64), (64, 3, 4, 128), (128, 3, 3, 64), (128, 3, 4, 128)],
    ),
    "--overlap": (
        [Variant(d, overlap=o) for d in ("fragments", "none") for o in (0, 1)],
        [(16, 3, 4, 64), (64, 3, 4, 128), (128, 3, 4, 128), (128, 3, 5, 128)],
    ),
    "--cluster": (
        [Variant("fragments", overlap=o, cluster=c) for o in (0, 1) for c in (0, 1)],
        [(16, CLUSTER_SPLITS, 4, 64), (64, CLUSTER_SPLITS, 4, 128), (128, CLUSTER_SPLITS, 4, 128), (128, CLUSTER_SPLITS, 5, 128)],
    ),
    None: (
        [Variant("slot", 0), Variant("slot"), Variant("pairs", 0), Variant("pairs"), Variant("fragments")],
        [(16, 3, 4, 64), (64, 3, 4, 64), (128, 2, 4, 64)],
    ),
}


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


def compile_variant(helpers, workdir, tm, tn, stages, v):
    name = f"tm{tm}_tn{tn}_s{stages}_{v.decode}_w{v.whole}_p{v.product}_q{v.producer}_o{v.overlap}_c{v.cluster}"
    src = os.path.join(workdir, name + ".cu")
    with open(src, "w") as f:
        f.write(helpers + issue_function(tm) + open(os.path.join(HERE, "qgemm_decode_probe.cu")).read())
    cubin = os.path.join(workdir, name + ".cubin")
    defines = [f"-DTM={tm}", f"-DTN={tn}u", f"-DSTAGES={stages}", f"-DDECODE={DECODES[v.decode]}", f"-DWHOLE={v.whole}", f"-DPRODUCT={v.product}", f"-DPRODUCER={v.producer}", f"-DOVERLAP={v.overlap}", f"-DCLUSTER_SUM={v.cluster}"]
    out = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v", *defines, "-o", cubin, src], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    serialised = "C7515" in out.stderr or "serialized" in out.stderr
    spills = [line.strip() for line in out.stderr.splitlines() if "spill" in line and not " 0 bytes spill stores, 0 bytes spill loads" in line]
    if spills:
        print(f"  ({name}: {spills[0]})")
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
    mode = sys.argv[2] if len(sys.argv) > 2 else None
    if mode not in MODES:
        sys.exit(f"mode {mode!r}: one of {', '.join(m for m in MODES if m)}, or none")
    variants, shapes = MODES[mode]
    helpers = prelude(sys.argv[1])
    torch.manual_seed(0)
    copies = -(-ROTATION_BYTES // (K * N // 2))
    words = [torch.randint(-(2**31), 2**31 - 1, (K // 8, N), dtype=torch.int32, device="cuda") for _ in range(copies)]
    scales = [(torch.rand(K // GROUP, N, device="cuda") * 0.01 + 0.005).half() for _ in range(copies)]
    positions = fragment_positions()
    fragments = [fragment_order(w, positions) for w in words]
    del positions
    w0 = dequantized(words[0], scales[0]).float()
    print(f"{'M':>4} {'N tile':>6} {'stages':>6} {'decode':>10} {'whole':>5} {'product':>7} {'producer':>8} {'overlap':>7} {'cluster':>7} {'splits':>6} {'us':>8}  notes")
    with tempfile.TemporaryDirectory() as workdir:
        for tm, splits, stages, tn in shapes:
            a = (torch.randn(tm, K, device="cuda") * 0.5).half()
            want = a.float() @ w0
            for v in variants:
                assert not v.cluster or splits == CLUSTER_SPLITS, "the cluster sum takes CLUSTER_SPLITS splits"
                fn, serialised = compile_variant(helpers, workdir, tm, tn, stages, v)
                smem = stages * (tm * 64 * 2 + 8 * tn * 4 + 2 * tn * 2)
                fn.max_dynamic_shared_size_bytes = smem
                c = torch.zeros(tm, N, device="cuda", dtype=torch.half) if v.cluster else torch.zeros(splits, tm, N, device="cuda")
                b = fragments if v.decode == "fragments" else words

                def launch(i):
                    args = (a.data_ptr(), b[i].data_ptr(), c.data_ptr(), np.uint32(tm), np.uint32(N), np.uint32(K), np.uint32(GROUP), scales[i].data_ptr(), np.uint32(splits))
                    fn((N // tn, 1, splits), (2 * tn + 32 * v.producer, 1, 1), args, shared_mem=smem)

                launch(0)
                torch.cuda.synchronize()
                notes = f"{fn.num_regs} registers"
                if v.decode != "none" and v.product:
                    got = c.float() if v.cluster else c.sum(0)
                    err = ((got - want).abs() / (want.abs() + 1.0)).max().item()
                    notes += f", max error {err:.1e}" + (" WRONG" if err > 1e-3 else "")
                else:
                    notes += ", a part of the loop: no product to check"
                seconds = median_seconds(launch, copies=list(range(copies)), held=True)
                notes += ", wgmma serialised by ptxas" if serialised else ""
                print(f"{tm:>4} {tn:>6} {stages:>6} {v.decode:>10} {v.whole:>5} {v.product:>7} {v.producer:>8} {v.overlap:>7} {v.cluster:>7} {splits:>6} {seconds * 1e6:8.2f}  {notes}", flush=True)
            f16 = [dequantized(words[i], scales[i]) for i in range(3)]
            seconds = median_seconds(lambda w: torch.matmul(a, w), copies=f16, held=True)
            print(f"{tm:>4} {'torch.matmul f16':>25} {seconds * 1e6:8.2f}", flush=True)


if __name__ == "__main__":
    main()
