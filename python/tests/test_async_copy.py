"""Asynchronous copies in the Python DSL: ``enigma.async_copy``,
``enigma.async_commit`` and ``enigma.async_wait`` in a two-stage pipeline
(16-, 8- and 4-byte copies, zero-filled past the end of the input) against
a numpy reference on the device under test; the same kernel is clean under
the simulator's sanitizer, and a pipeline that waits for too little or skips
the barrier after the wait is an ``async_copy_in_flight`` finding; wrong uses
are CompileErrors carrying the IR rule's message and the Python line."""

from __future__ import annotations

import numpy as np
import pytest

import enigma

# Threads per threadgroup (and vectors per stage), chunks each threadgroup
# streams, outputs per thread and chunk.
T = 64
CHUNKS = 5
OUTS = 3
GROUPS = 3


def make_pipeline(pending):
    """The pipeline below, waiting until at most ``pending`` groups are in
    flight (1 is right: the next chunk's)."""

    @enigma.kernel
    def pipeline(vecs: enigma.uint4, halves: enigma.f16, words: enigma.u32, n: enigma.constant(enigma.u32), out: enigma.u32):
        """Each threadgroup streams CHUNKS chunks of T elements of three inputs
        through two stages: chunk c + 1 is in flight while the threads read
        chunk c (async_wait(1), then a barrier). Element i past n is copied as
        zeros. Thread lid writes the component sum of vector (5·lid + 3) mod T,
        the sum of quadruple (lid + 7) mod T and word (lid + 1) mod T of each
        chunk."""
        tv = enigma.threadgroup_alloc(enigma.uint4, 2 * T)
        th = enigma.threadgroup_alloc(enigma.f16, (2 * T, 4))
        tw = enigma.threadgroup_alloc(enigma.u32, 2 * T)
        lid = enigma.thread_index_in_threadgroup()
        first = enigma.threadgroup_position_in_grid("x") * CHUNKS
        s = first % 2 * T
        i = first * T + lid
        enigma.async_copy(tv[s + lid], vecs[i], valid=i < n)
        enigma.async_copy(th[s + lid, 0], halves[i * 4], count=4, valid=i < n)
        enigma.async_copy(tw[s + lid], words[i], count=1, valid=i < n)
        enigma.async_commit()
        for c in range(CHUNKS):
            if c + 1 < CHUNKS:
                chunk = first + c + 1
                stage = chunk % 2 * T
                j = chunk * T + lid
                enigma.async_copy(tv[stage + lid], vecs[j], valid=j < n)
                enigma.async_copy(th[stage + lid, 0], halves[j * 4], count=4, valid=j < n)
                enigma.async_copy(tw[stage + lid], words[j], valid=j < n)
            enigma.async_commit()
            enigma.async_wait(pending)
            enigma.barrier(mem_flags="mem_threadgroup")
            cur = (first + c) % 2 * T
            v = tv[cur + (lid * 5 + 3) % T]
            q = cur + (lid + 7) % T
            h = th[q, 0] + th[q, 1] + th[q, 2] + th[q, 3]
            at = ((first + c) * T + lid) * OUTS
            out[at] = v.x + v.y + v.z + v.w
            out[at + 1] = enigma.u32(h)
            out[at + 2] = tw[cur + (lid + 1) % T]
            # The stage just read is refilled in the next iteration.
            enigma.barrier(mem_flags="mem_threadgroup")

    return pipeline


pipeline = make_pipeline(1)


def _inputs(seed):
    total = GROUPS * CHUNKS * T
    n = total - T - 19  # the last threadgroup's last chunks are zero-filled
    rng = np.random.default_rng(seed)
    vs = rng.integers(0, 1 << 28, (n, 4), dtype=np.uint32)
    hs = rng.integers(0, 64, (n, 4)).astype(np.float16)
    ws = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    return n, vs, hs, ws


def _reference(n, vs, hs, ws):
    want = np.zeros((GROUPS * CHUNKS, T, OUTS), np.uint32)
    for chunk in range(GROUPS * CHUNKS):
        for lid in range(T):
            v = chunk * T + (lid * 5 + 3) % T
            q = chunk * T + (lid + 7) % T
            w = chunk * T + (lid + 1) % T
            want[chunk, lid] = [
                vs[v].sum(dtype=np.uint32) if v < n else 0,
                int(hs[q].astype(np.float32).sum()) if q < n else 0,
                ws[w] if w < n else 0,
            ]
    return want.reshape(-1)


def _run(runtime, kernel, seed, **kw):
    n, vs, hs, ws = _inputs(seed)
    out = runtime.execute(
        enigma.compile(kernel), inputs=[vs, hs, ws, n], output_size=GROUPS * CHUNKS * T * OUTS * 4,
        threadgroups=(GROUPS, 1, 1), threads=(T, 1, 1), **kw,
    )
    return np.frombuffer(out, np.uint32), _reference(n, vs, hs, ws)


def test_two_stage_pipeline_matches_numpy(rt):
    got, want = _run(rt, pipeline, 1)
    np.testing.assert_array_equal(got, want)


def test_the_ir_has_the_copies():
    ir = enigma.compile(pipeline).ir
    assert ir.count("async_copy(") == 6 and "async_commit()" in ir and "async_wait(1)" in ir


def test_two_stage_pipeline_is_clean_under_the_sanitizer():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    got, want = _run(rt, pipeline, 2)
    np.testing.assert_array_equal(got, want)
    assert rt.last_report is not None


@enigma.kernel
def no_barrier_after_wait(src: enigma.u32, out: enigma.u32):
    """Every copy is complete, but other threads' copies are not visible yet."""
    a = enigma.threadgroup_alloc(enigma.u32, 64)
    lid = enigma.thread_index_in_threadgroup()
    enigma.async_copy(a[lid], src[lid])
    enigma.async_commit()
    enigma.async_wait(0)
    out[lid] = a[63 - lid]


def test_waiting_for_too_little_is_a_copy_in_flight():
    """async_wait(2) in the pipeline: the chunk read may still be in flight."""
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        _run(rt, make_pipeline(2), 3)
    kinds = {str(r["kind"]) for r in e.value.reports}
    assert "async_copy_in_flight" in kinds, kinds
    assert any(r["variable"] in ("tv", "th", "tw") for r in e.value.reports)


def test_no_barrier_after_the_wait_is_a_race():
    """The wait completes a thread's own copies; other threads' are visible
    only after a barrier."""
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    src = np.arange(64, dtype=np.uint32)
    with pytest.raises(enigma.SanitizerError) as e:
        rt.execute(enigma.compile(no_barrier_after_wait), inputs=[src], output_size=256, grid=64, threads=64)
    kinds = {str(r["kind"]) for r in e.value.reports}
    assert "threadgroup_race" in kinds, kinds


@enigma.kernel
def copy_sizes(w: enigma.u32, h: enigma.f16, v: enigma.float4, n: enigma.constant(enigma.u32), out: enigma.u32):
    """4-byte (one u32, two f16), 8-byte (two u32, four f16) and 16-byte
    (four u32, one float4) copies, each element past ``n`` words zero-filled;
    every thread then reads its neighbour's slots."""
    tw = enigma.threadgroup_alloc(enigma.u32, (32, 8))
    th = enigma.threadgroup_alloc(enigma.f16, (32, 8))
    tv = enigma.threadgroup_alloc(enigma.float4, 32)
    lid = enigma.thread_index_in_threadgroup()
    g = enigma.thread_position_in_grid
    enigma.async_copy(tw[lid, 0], w[g * 8], count=1, valid=g * 8 < n)
    enigma.async_copy(tw[lid, 1], w[g * 8 + 1], valid=g * 8 + 1 < n)
    enigma.async_copy(tw[lid, 2], w[g * 8 + 2], count=2, valid=g * 8 + 2 < n)
    enigma.async_copy(tw[lid, 4], w[g * 8 + 4], count=4, valid=g * 8 + 4 < n)
    enigma.async_copy(th[lid, 0], h[g * 8], count=2, valid=g * 8 < n)
    enigma.async_copy(th[lid, 2], h[g * 8 + 2], count=2, valid=False)
    enigma.async_copy(th[lid, 4], h[g * 8 + 4], count=4, valid=g * 8 + 4 < n)
    enigma.async_copy(tv[lid], v[g], valid=g * 8 < n)
    enigma.async_commit()
    enigma.async_wait(0)
    enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
    o = (lid + 1) % 32
    for k in range(8):
        out[g * 13 + k] = tw[o, k] + enigma.u32(th[o, k])
    x = tv[o]
    out[g * 13 + 8] = enigma.u32(x.x)
    out[g * 13 + 9] = enigma.u32(x.y)
    out[g * 13 + 10] = enigma.u32(x.z)
    out[g * 13 + 11] = enigma.u32(x.w)
    out[g * 13 + 12] = lid


def test_4_8_and_16_byte_copies_with_zero_fill(rt):
    threads, groups = 32, 2
    total = threads * groups
    n = total * 8 - 8 * 5 - 3  # thread 58's words 5.., threads 59.. entirely past n
    rng = np.random.default_rng(5)
    w = rng.integers(0, 1 << 20, total * 8, dtype=np.uint32)
    h = rng.integers(0, 100, total * 8).astype(np.float16)
    v = rng.integers(0, 1000, (total, 4)).astype(np.float32)
    out = np.frombuffer(
        rt.execute(enigma.compile(copy_sizes), inputs=[w, h, v, n], output_size=total * 13 * 4, grid=total, threads=threads),
        np.uint32,
    ).reshape(total, 13)
    # Each copy (first element, count) of a thread's eight words and halves,
    # valid when its first element is below n; the halves' second copy never is.
    def copied(data, copies, g):
        slots = np.zeros(8, data.dtype)
        for first, count, valid in copies:
            if valid and g * 8 + first < n:
                slots[first:first + count] = data[g * 8 + first:g * 8 + first + count]
        return slots

    want = np.zeros((total, 13), np.uint32)
    for gid in range(total):
        g = gid - gid % threads + (gid % threads + 1) % threads  # the neighbour whose slots are read
        words = copied(w, [(0, 1, True), (1, 1, True), (2, 2, True), (4, 4, True)], g)
        halves = copied(h, [(0, 2, True), (2, 2, False), (4, 4, True)], g)
        want[gid, :8] = words + halves.astype(np.uint32)
        want[gid, 8:12] = v[g].astype(np.uint32) if g * 8 < n else 0
        want[gid, 12] = gid % threads
    np.testing.assert_array_equal(out, want)


def _compile_error(tmp_path, body):
    """The CompileError of a kernel, in a file of its own, whose body is
    ``body`` after a threadgroup array ``tile`` of 64 u32s and ``lid``; it
    names the file and the line of ``body``."""
    path = tmp_path / "bad.py"
    src = (
        "import enigma\n\n\n"
        "def bad(src: enigma.u32, out: enigma.u32):\n"
        "    tile = enigma.threadgroup_alloc(enigma.u32, 64)\n"
        "    lid = enigma.thread_index_in_threadgroup()\n"
        f"    {body}\n"
    )
    path.write_text(src)
    ns = {"__name__": "bad", "__file__": str(path)}
    exec(compile(src, str(path), "exec"), ns)  # noqa: S102 - a kernel in a file of its own
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(ns["bad"])
    message = str(e.value)
    assert f"{path}:7:" in message and body in message, message
    return message


@pytest.mark.parametrize(
    "body, rule",
    [
        ("enigma.async_copy(tile[lid], src[lid], count=3)", "moves 4, 8 or 16 bytes; 3 × u32 is 12 bytes"),
        ("enigma.async_copy(out[lid], src[lid])", "copies from a device buffer to threadgroup memory, not from `src` to `out`"),
        ("enigma.async_copy(tile[lid], src[lid], valid=lid)", "takes a bool saying whether to read the source (false: zeros), found u32"),
        ("enigma.async_copy(tile[lid], src[lid], valid=1)", "takes a bool saying whether to read the source (false: zeros), found i32"),
        ("enigma.async_wait(8)", "`async_wait(8)` leaves too many groups in flight (at most 7)"),
    ],
)
def test_wrong_uses_carry_the_ir_rule(tmp_path, body, rule):
    message = _compile_error(tmp_path, body)
    assert f"`async_copy` {rule}" in message, message


@pytest.mark.parametrize(
    "body, says",
    [
        ("enigma.async_copy(tile, src[lid])", "`dst` of enigma.async_copy is an element"),
        ("enigma.async_copy(tile[lid], src[lid], count=lid)", "`count` of enigma.async_copy is a non-negative integer known at compile time"),
        ("enigma.async_wait(lid)", "`pending` of enigma.async_wait is a non-negative integer known at compile time"),
        ("enigma.async_wait(-1)", "not -1"),
        ("x = enigma.async_commit()", "enigma.async_commit(...) is a statement; it has no value"),
        ("enigma.async_commit(1)", "enigma.async_commit takes at most 0 argument(s)"),
    ],
)
def test_front_end_errors(tmp_path, body, says):
    message = _compile_error(tmp_path, body)
    assert says in message, message
