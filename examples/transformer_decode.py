"""One decode step of a transformer block's attention path on torch CUDA
tensors with enigma's kernels, beside the same step in torch.

    hidden --RMSNorm--> x --W_q·x--> q [H, D] --attention over the KV cache--> o [H, D]
           --W_out·o--> logits [V] --softmax--> probabilities

enigma runs every step (``enigma.ops.rms_norm``, ``gemv``,
``attention_decode(fused=True)``, ``softmax``) on the torch tensors in place
and on torch's current stream, so the step is queued like torch's own and
nothing crosses to the host. The script checks enigma's probabilities
against torch's and prints the time per step of both (CUDA events, median
of 20 after warm-ups). Needs a CUDA GPU, torch and the enigma wheel:

    python3 examples/transformer_decode.py [--heads 32] [--head-dim 128] [--seq 4096] [--vocab 32000]
"""
import argparse
import math

import torch

import enigma
import enigma.ops as ops


def torch_step(hidden, w_norm, w_q, k_cache, v_cache, w_out, eps):
    h, _, d = k_cache.shape
    x = hidden * torch.rsqrt(hidden.pow(2).mean(dim=-1, keepdim=True) + eps) * w_norm
    q = (w_q @ x[0]).reshape(h, d)
    scores = torch.einsum("hd,hsd->hs", q, k_cache) / math.sqrt(d)
    o = torch.einsum("hs,hsd->hd", torch.softmax(scores, dim=-1), v_cache)
    logits = w_out @ o.reshape(-1)
    return torch.softmax(logits.reshape(1, -1), dim=-1)


def enigma_step(hidden, w_norm, w_q, k_cache, v_cache, w_out, eps):
    h, _, d = k_cache.shape
    x = ops.rms_norm(hidden, w_norm, eps=eps)
    q = ops.gemv(w_q, x.reshape(-1)).reshape(h, d)
    o = ops.attention_decode(q, k_cache, v_cache, fused=True)
    logits = ops.gemv(w_out, o.reshape(-1))
    return ops.softmax(logits.reshape(1, -1))


def median_ms(fn, reps=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=32000)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    h, d, s, v = args.heads, args.head_dim, args.seq, args.vocab
    g = torch.Generator(device="cuda").manual_seed(0)
    hidden = torch.randn(1, h * d, device="cuda", generator=g)
    w_norm = torch.rand(h * d, device="cuda", generator=g) + 0.5
    w_q = torch.randn(h * d, h * d, device="cuda", generator=g) / math.sqrt(h * d)
    k_cache = torch.randn(h, s, d, device="cuda", generator=g)
    v_cache = torch.randn(h, s, d, device="cuda", generator=g)
    w_out = torch.randn(v, h * d, device="cuda", generator=g) / math.sqrt(h * d)
    inputs = (hidden, w_norm, w_q, k_cache, v_cache, w_out, 1e-6)

    want = torch_step(*inputs)
    got = enigma_step(*inputs)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    err = (got - want).abs().max().item()
    print(f"{torch.cuda.get_device_name()}: H={h} D={d} S={s} V={v}; max |enigma - torch| = {err:.3g}")
    if not torch.allclose(got, want, rtol=1e-3, atol=1e-6):
        raise SystemExit("enigma's probabilities differ from torch's")
    t_torch = median_ms(lambda: torch_step(*inputs))
    t_enigma = median_ms(lambda: enigma_step(*inputs))
    print(f"torch  {t_torch * 1e3:9.1f} us per step")
    print(f"enigma {t_enigma * 1e3:9.1f} us per step ({t_enigma / t_torch:.2f}x torch)")


if __name__ == "__main__":
    main()
