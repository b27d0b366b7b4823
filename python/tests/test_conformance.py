"""Conformance through Python: kernels written with the decorator, run on the
device under test (``ENIGMA_TEST_DEVICE``), each checked against a numpy
reference computed here from the Metal execution model's rules.

Covered: every builtin in a 2-D grid with partial edge threadgroups;
threadgroups of 1, 7, 33 and 100 threads; the SIMD-group functions over the
active lanes of divergent branches (and their else side); loops with carried
variables, nested loops, while/break/continue, early return; if_/elif_/else_;
atomics on device and threadgroup memory; narrow, wide and vector types;
math functions; load_if.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import enigma
from conftest import as_array

SENT = 0xDEADBEEF


# --- builtins ----------------------------------------------------------------

@enigma.kernel
def all_builtins(Rec: enigma.u32):
    gx = enigma.thread_position_in_grid("x")
    gy = enigma.thread_position_in_grid.y
    w = enigma.threads_per_grid("x")
    base = (gy * w + gx) * 20
    Rec[base + 0] = gx
    Rec[base + 1] = gy
    Rec[base + 2] = enigma.thread_position_in_threadgroup("x")
    Rec[base + 3] = enigma.thread_position_in_threadgroup(1)
    Rec[base + 4] = enigma.threadgroup_position_in_grid("x")
    Rec[base + 5] = enigma.threadgroup_position_in_grid("y")
    Rec[base + 6] = enigma.threads_per_threadgroup("x")
    Rec[base + 7] = enigma.threads_per_threadgroup("y")
    Rec[base + 8] = enigma.threads_per_threadgroup("z")
    Rec[base + 9] = w
    Rec[base + 10] = enigma.threads_per_grid("y")
    Rec[base + 11] = enigma.threadgroups_per_grid("x")
    Rec[base + 12] = enigma.threadgroups_per_grid("y")
    Rec[base + 13] = enigma.thread_index_in_threadgroup()
    Rec[base + 14] = enigma.thread_index_in_simdgroup
    Rec[base + 15] = enigma.simdgroup_index_in_threadgroup()
    Rec[base + 16] = enigma.simdgroups_per_threadgroup()
    Rec[base + 17] = enigma.threads_per_simdgroup()
    Rec[base + 18] = enigma.thread_position_in_grid.z
    v = enigma.thread_position_in_threadgroup
    Rec[base + 19] = v.x + v.y * 100


@pytest.mark.parametrize("grid,tg", [((37, 11), (16, 4)), ((64, 3), (32, 1)), ((5, 5), (7, 3))])
def test_builtins_2d_partial_threadgroups(rt, grid, tg):
    W, H = grid
    TX, TY = tg
    out = rt.execute(enigma.compile(all_builtins), inputs=[], output_size=W * H * 20 * 4,
                     grid=(W, H, 1), threads=(TX, TY, 1))
    rec = as_array(out, np.uint32, (H, W, 20))
    gy, gx = np.mgrid[0:H, 0:W]
    tgx, tgy = gx // TX, gy // TY
    lx, ly = gx % TX, gy % TY
    pw = np.minimum(TX, W - tgx * TX)  # the partial size of edge threadgroups
    ph = np.minimum(TY, H - tgy * TY)
    lin = lx + ly * pw
    expect = [gx, gy, lx, ly, tgx, tgy, pw, ph, np.ones_like(gx), np.full_like(gx, W), np.full_like(gx, H),
              np.full_like(gx, -(-W // TX)), np.full_like(gx, -(-H // TY)), lin, lin % 32, lin // 32,
              -(-(pw * ph) // 32), np.full_like(gx, 32), np.zeros_like(gx), lx + ly * 100]
    for k, e in enumerate(expect):
        np.testing.assert_array_equal(rec[:, :, k], e, err_msg=f"slot {k}")


# --- threadgroup sizes ---------------------------------------------------------

@enigma.kernel
def tg_sums(A: enigma.u32, n: enigma.constant(enigma.u32), Out: enigma.u32, Info: enigma.u32):
    tid = enigma.thread_position_in_grid
    lid = enigma.thread_index_in_threadgroup()
    sgid = enigma.simdgroup_index_in_threadgroup()
    scratch = enigma.threadgroup_alloc(enigma.u32, 32)
    v = enigma.load_if(A, tid, tid < n, 0)
    s = enigma.simd_sum(v)
    with enigma.if_(enigma.simd_is_first()):
        scratch[sgid] = s
    enigma.barrier(mem_flags="mem_threadgroup")
    with enigma.if_(lid == 0):
        total = enigma.u32(0)
        for i in range(enigma.simdgroups_per_threadgroup()):
            total += scratch[i]
        g = enigma.threadgroup_position_in_grid.x
        Out[g] = total
        Info[g] = enigma.threads_per_threadgroup.x * 100 + enigma.simdgroups_per_threadgroup()


@pytest.mark.parametrize("T", [1, 7, 32, 33, 100, 1024])
def test_threadgroup_sizes(rt, T):
    n = 2000
    a = (np.arange(n, dtype=np.uint32) * 2654435761 % 1000).astype(np.uint32)
    groups = -(-n // T)
    sums, info = rt.execute(enigma.compile(tg_sums), inputs=[a, n], output_size=[groups * 4, groups * 4],
                            grid=(n, 1, 1), threads=(T, 1, 1))
    padded = np.zeros(groups * T, np.uint64)
    padded[:n] = a
    np.testing.assert_array_equal(as_array(sums, np.uint32), padded.reshape(groups, T).sum(1))
    sizes = np.minimum(T, n - np.arange(groups) * T)
    np.testing.assert_array_equal(as_array(info, np.uint32), sizes * 100 + -(-sizes // 32))


# --- SIMD-group functions in divergent branches ----------------------------------

@enigma.kernel
def simd_divergent(F: enigma.f32, U: enigma.u32, I: enigma.i32, OutF: enigma.f32, OutU: enigma.u32):
    t = enigma.thread_position_in_grid("x")
    lane = enigma.thread_index_in_simdgroup()
    f = F[t]
    u = U[t]
    i = I[t]
    base = t * 16
    with enigma.if_(lane % 3 != 0):
        OutF[base + 0] = enigma.simd_sum(f)
        OutF[base + 1] = enigma.simd_max(f)
        OutF[base + 2] = enigma.simd_min(f)
        OutF[base + 3] = enigma.simd_prefix_exclusive_sum(f)
        OutF[base + 4] = enigma.simd_broadcast(f, 1)
        OutF[base + 5] = enigma.simd_product(enigma.select(1.0, -2.0, f > 1.0))
        OutU[base + 0] = enigma.simd_sum(u)
        OutU[base + 1] = enigma.simd_and(u)
        OutU[base + 2] = enigma.simd_or(u)
        OutU[base + 3] = enigma.simd_xor(u)
        OutU[base + 4] = enigma.simd_prefix_inclusive_sum(u)
        OutU[base + 5] = enigma.simd_broadcast_first(u)
        OutU[base + 6] = enigma.u32(enigma.simd_max(i))
        OutU[base + 7] = enigma.u32(enigma.simd_min(i))
        b = enigma.simd_ballot(f > 0.0)
        OutU[base + 8] = enigma.u32(b & 0xFFFFFFFF)
        OutU[base + 9] = enigma.u32(b >> 32)
        OutU[base + 10] = enigma.select(enigma.u32(0), 1, enigma.simd_all(f > -100.0))
        OutU[base + 11] = enigma.select(enigma.u32(0), 1, enigma.simd_any(f > 2.0))
        OutU[base + 12] = enigma.select(enigma.u32(0), 1, enigma.simd_is_first())
    with enigma.else_():
        OutF[base + 6] = enigma.simd_sum(f)
        OutU[base + 13] = enigma.u32(enigma.simd_prefix_exclusive_sum(i))
    if lane < 16:
        OutU[base + 14] = enigma.simd_shuffle_xor(u, 5) + enigma.simd_shuffle_up(u, 2) * 1000
        OutF[base + 7] = enigma.simd_shuffle(f, (lane * 7) % 16)
    else:
        OutU[base + 15] = enigma.simd_shuffle_down(u, 3)


def test_simd_functions_in_divergent_branches(rt):
    n, T = 160, 80  # two threadgroups of 80: SIMD groups of 32, 32 and 16 lanes
    rng = np.random.default_rng(7)
    f = (rng.integers(-40, 40, n) / 4).astype(np.float32)  # quarters: sums are exact
    u = rng.integers(0, 1 << 31, n, dtype=np.uint32)
    i = rng.integers(-1000, 1000, n).astype(np.int32)
    outf = np.full(n * 16, np.nan, np.float32)
    outu = np.full(n * 16, SENT, np.uint32)
    rt.execute(enigma.compile(simd_divergent), inputs=[f, u, i], outputs=[outf, outu], grid=n, threads=T)
    outf, outu = outf.reshape(n, 16), outu.reshape(n, 16)

    ef = np.full((n, 16), np.nan, np.float32)
    eu = np.full((n, 16), SENT, np.uint32)
    for g0 in range(0, n, T):
        for s0 in range(g0, min(g0 + T, n), 32):
            threads = list(range(s0, min(s0 + 32, g0 + T, n)))
            lane = {t: t - s0 for t in threads}
            act = [t for t in threads if lane[t] % 3 != 0]
            rest = [t for t in threads if lane[t] % 3 == 0]
            lane1 = next(t for t in act if lane[t] == 1)
            ballot = sum(1 << lane[t] for t in act if f[t] > 0)
            for t in act:
                before = [x for x in act if lane[x] < lane[t]]
                ef[t, :6] = [f[act].sum(), f[act].max(), f[act].min(), f[before].sum(), f[lane1],
                             np.prod(np.where(f[act] > 1.0, -2.0, 1.0))]
                eu[t, :13] = [u[act].sum(dtype=np.uint32), np.bitwise_and.reduce(u[act]), np.bitwise_or.reduce(u[act]),
                              np.bitwise_xor.reduce(u[act]), u[before + [t]].sum(dtype=np.uint32), u[act[0]],
                              int(i[act].max()) & 0xFFFFFFFF, int(i[act].min()) & 0xFFFFFFFF,
                              ballot & 0xFFFFFFFF, ballot >> 32, all(f[act] > -100), any(f[act] > 2), t == act[0]]
            for t in rest:
                ef[t, 6] = f[rest].sum()
                eu[t, 13] = np.uint32(int(i[[x for x in rest if lane[x] < lane[t]]].sum()) & 0xFFFFFFFF)
            low = [t for t in threads if lane[t] < 16]
            by_lane = {lane[t]: t for t in threads}
            for t in low:
                l = lane[t]
                up = by_lane[l - 2] if l >= 2 else t
                eu[t, 14] = np.uint32((int(u[by_lane[l ^ 5]]) + int(u[up]) * 1000) & 0xFFFFFFFF)
                ef[t, 7] = f[by_lane[(l * 7) % 16]]
            for t in threads:
                l = lane[t]
                if l >= 16:
                    eu[t, 15] = u[by_lane[l + 3]] if l + 3 < 32 else u[t]
    np.testing.assert_array_equal(outu, eu)
    np.testing.assert_array_equal(outf, ef)


def test_seed_style_partial_simd_sum(rt):
    """simd_sum inside `if lane < 8` sums 8 lanes (seed 001 relies on it)."""

    @enigma.kernel
    def first8(A: enigma.f32, Out: enigma.f32):
        lane = enigma.thread_index_in_simdgroup()
        tid = enigma.thread_position_in_grid
        with enigma.if_(enigma.cmp_lt(lane, 8)):
            Out[tid] = enigma.simd_sum(A[tid])

    a = np.arange(64, dtype=np.float32)
    out = as_array(rt.execute(enigma.compile(first8), inputs=[a], output_size=256, grid=64, threads=64), np.float32)
    for s in (0, 32):
        np.testing.assert_array_equal(out[s:s + 8], np.full(8, a[s:s + 8].sum()))
        np.testing.assert_array_equal(out[s + 8:s + 32], 0)


# --- control flow ---------------------------------------------------------------

@enigma.kernel
def control(A: enigma.i32, n: enigma.constant(enigma.u32), Out: enigma.i32, Steps: enigma.u32):
    tid = enigma.thread_position_in_grid("x")
    if tid >= n:
        return
    # loop-carried variable over a data-dependent trip count
    acc = 0
    with enigma.for_range(0, tid % 7 + 1) as k:
        acc = acc + A[k]
    # nested loops with a step
    for a in range(1, 4):
        for b in range(0, 10, 3):
            acc += a * b
    # while with continue and break: a Collatz walk, at most 200 steps
    x = enigma.u32(tid + 1)
    steps = enigma.u32(0)
    while x != 1:
        steps += 1
        if steps > 200:
            break
        if x % 2 == 0:
            x = x / 2
            continue
        x = 3 * x + 1
    # if_ / elif_ / else_ chain
    with enigma.if_(acc < 0):
        acc = -acc
    with enigma.elif_(acc > 100):
        acc = acc - 100
    with enigma.else_():
        acc = acc * 2
    Out[tid] = acc + (7 if tid % 2 == 0 else -7)
    Steps[tid] = steps


def _collatz(x):
    steps = 0
    while x != 1:
        steps += 1
        if steps > 200:
            break
        x = x // 2 if x % 2 == 0 else 3 * x + 1
    return steps


def test_control_flow(rt):
    n = 90
    a = np.random.default_rng(3).integers(-60, 60, 16).astype(np.int32)
    out = np.full(100, SENT, np.uint32).view(np.int32)
    steps = np.full(100, SENT, np.uint32)
    rt.execute(enigma.compile(control), inputs=[a, n], outputs=[out, steps], grid=100, threads=32)
    for t in range(100):
        if t >= n:  # returned early: untouched
            assert out[t] == np.uint32(SENT).view(np.int32) and steps[t] == SENT
            continue
        acc = int(a[: t % 7 + 1].sum()) + sum(x * y for x in range(1, 4) for y in range(0, 10, 3))
        acc = -acc if acc < 0 else (acc - 100 if acc > 100 else acc * 2)
        assert out[t] == acc + (7 if t % 2 == 0 else -7), t
        assert steps[t] == _collatz(t + 1), t


# --- atomics ---------------------------------------------------------------------

@enigma.kernel
def atomics(A: enigma.u32, Hist: enigma.u32, Compact: enigma.u32, Count: enigma.u32, TgMax: enigma.u32):
    tid = enigma.thread_position_in_grid("x")
    v = A[tid]
    enigma.atomic_add(Hist, v % 16, 1)
    with enigma.if_(v % 5 == 0):
        slot = enigma.atomic_add(Count, 0, 1)
        Compact[slot] = v
    m = enigma.threadgroup_alloc(enigma.u32, 1)
    lid = enigma.thread_index_in_threadgroup()
    with enigma.if_(lid == 0):
        m[0] = 0
    enigma.barrier(mem_flags="mem_threadgroup")
    enigma.atomic_max(m, 0, v)
    enigma.barrier(mem_flags="mem_threadgroup")
    with enigma.if_(lid == 0):
        TgMax[enigma.threadgroup_position_in_grid.x] = m[0]


def test_atomics(rt):
    n, T = 1000, 64
    a = np.random.default_rng(11).integers(0, 100000, n).astype(np.uint32)
    groups = -(-n // T)
    hist, compact, count, tgmax = rt.execute(
        enigma.compile(atomics), inputs=[a], output_size=[16 * 4, n * 4, 4, groups * 4], grid=n, threads=T)
    np.testing.assert_array_equal(as_array(hist, np.uint32), np.bincount(a % 16, minlength=16))
    c = int(as_array(count, np.uint32)[0])
    mult5 = np.sort(a[a % 5 == 0])
    assert c == len(mult5)
    np.testing.assert_array_equal(np.sort(as_array(compact, np.uint32)[:c]), mult5)
    padded = np.zeros(groups * T, np.uint32)
    padded[:n] = a
    np.testing.assert_array_equal(as_array(tgmax, np.uint32), padded.reshape(groups, T).max(1))


def test_atomic_float_add(rt):
    @enigma.kernel
    def fsum(A: enigma.f32, Out: enigma.f32):
        enigma.atomic_add(Out, 0, A[enigma.thread_position_in_grid])

    a = np.arange(256, dtype=np.float32) / 4  # quarters: every order sums exactly
    out = rt.execute(enigma.compile(fsum), inputs=[a], output_size=4, grid=256, threads=128)
    assert as_array(out, np.float32)[0] == a.sum()


# --- types and math --------------------------------------------------------------

def test_vector_types(rt):
    @enigma.kernel
    def vec(A: enigma.float4, B: enigma.f32, Out: enigma.float4, Dots: enigma.f32):
        tid = enigma.thread_position_in_grid
        v = A[tid]
        s = B[tid]
        w = v * s + enigma.float4(1.0, 2.0, 3.0, 4.0)
        Out[tid] = enigma.float4(w.wz, w.y, w.x)
        Dots[tid] = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w

    a = np.random.default_rng(5).integers(-8, 8, (50, 4)).astype(np.float32)
    b = np.arange(50, dtype=np.float32)
    out, dots = rt.execute(enigma.compile(vec), inputs=[a, b], output_size=[50 * 16, 50 * 4], grid=50, threads=16)
    w = a * b[:, None] + np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(as_array(out, np.float32, (50, 4)), w[:, [3, 2, 1, 0]])
    np.testing.assert_array_equal(as_array(dots, np.float32), (a * a).sum(1))


def test_integer_types_and_c_division(rt):
    @enigma.kernel
    def ints(A: enigma.i64, B: enigma.u8, C: enigma.i32, D: enigma.u64, OutA: enigma.i64, OutB: enigma.u8,
             OutC: enigma.i32, OutD: enigma.u64):
        t = enigma.thread_position_in_grid
        OutA[t] = A[t] * 3 - 1
        OutB[t] = B[t] + 200  # wraps in u8
        OutC[t] = C[t] / 7 + C[t] % 7 * 100  # C's truncating division
        OutD[t] = (D[t] >> 3) ^ D[t]

    rng = np.random.default_rng(2)
    a = rng.integers(-(1 << 60), 1 << 60, 40).astype(np.int64)
    b = rng.integers(0, 256, 40).astype(np.uint8)
    c = rng.integers(-1000, 1000, 40).astype(np.int32)
    d = rng.integers(0, 1 << 63, 40, dtype=np.uint64)
    oa, ob, oc, od = rt.execute(enigma.compile(ints), inputs=[a, b, c, d], output_size=[320, 40, 160, 320], grid=40,
                                threads=8)
    np.testing.assert_array_equal(as_array(oa, np.int64), a * 3 - 1)
    np.testing.assert_array_equal(as_array(ob, np.uint8), (b.astype(np.int32) + 200) % 256)
    trunc = np.fix(c / 7).astype(np.int32)
    np.testing.assert_array_equal(as_array(oc, np.int32), trunc + (c - trunc * 7) * 100)
    np.testing.assert_array_equal(as_array(od, np.uint64), (d >> np.uint64(3)) ^ d)


def test_half_precision(rt):
    @enigma.kernel
    def halves(A: enigma.f16, Out: enigma.f16):
        t = enigma.thread_position_in_grid
        Out[t] = A[t] * A[t] + enigma.f16(0.5)

    a = np.linspace(-4, 4, 33).astype(np.float16)
    out = rt.execute(enigma.compile(halves), inputs=[a], output_size=66, grid=33, threads=33)
    np.testing.assert_array_equal(as_array(out, np.float16), (a * a) + np.float16(0.5))


def test_math_functions(rt):
    @enigma.kernel
    def maths(X: enigma.f32, Out: enigma.f32):
        t = enigma.thread_position_in_grid
        x = X[t]
        b = t * 8
        Out[b + 0] = enigma.exp(x)
        Out[b + 1] = enigma.sqrt(enigma.abs(x))
        Out[b + 2] = enigma.tanh(x)
        Out[b + 3] = enigma.fma(x, 2.0, 1.0)
        Out[b + 4] = enigma.clamp(x, -0.5, 0.5)
        Out[b + 5] = enigma.max(x, 0.0) + enigma.min(x, 0.0) * 2.0
        Out[b + 6] = enigma.floor(x) + enigma.ceil(x)
        Out[b + 7] = x ** 2.0

    x = np.linspace(-2, 2, 41).astype(np.float32)
    out = as_array(rt.execute(enigma.compile(maths), inputs=[x], output_size=41 * 32, grid=41, threads=41),
                   np.float32, (41, 8))
    ref = np.stack([np.exp(x), np.sqrt(np.abs(x)), np.tanh(x), x * 2 + 1, np.clip(x, -0.5, 0.5),
                    np.maximum(x, 0) + np.minimum(x, 0) * 2, np.floor(x) + np.ceil(x), x ** 2], axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_3d_grid_and_module_constants(rt):
    @enigma.kernel
    def grid3(Out: enigma.u32):
        p = enigma.thread_position_in_grid
        Out[(p.z * DEPTH_STRIDE) + p.y * 6 + p.x] = p.x + p.y * 10 + p.z * 100

    out = as_array(rt.execute(enigma.compile(grid3), inputs=[], output_size=6 * 5 * 4 * 4, grid=(6, 5, 4),
                              threads=(4, 2, 2)), np.uint32, (4, 5, 6))
    z, y, x = np.mgrid[0:4, 0:5, 0:6]
    np.testing.assert_array_equal(out, x + y * 10 + z * 100)


DEPTH_STRIDE = 30  # read by grid3 when it compiles: kernels compile on first use
