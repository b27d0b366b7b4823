"""Issue 18: bad or unusual inputs end in the documented exceptions, never a
panic, an abort or a hang — allocations sized by the caller, runaway
kernels, reports per dispatch, argument errors naming the parameter."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import enigma


@enigma.kernel
def k_copy(A: enigma.f32, Out: enigma.f32):
    t = enigma.thread_position_in_grid("x")
    Out[t] = A[t]


def _run_script(tmp_path, script):
    """Runs `script` in a fresh interpreter from a file (enigma reads a
    kernel's source, so kernels cannot come from `python -c`)."""
    path = tmp_path / "script.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)


# --- allocations (defect 1) -------------------------------------------------


@pytest.mark.parametrize("size", [2**64, 2**70, 1 << 52])
def test_outputs_no_machine_holds_are_dispatch_errors(size):
    rt = enigma.MetalRuntime(device="cpu")
    a = np.ones(64, np.float32)
    with pytest.raises(enigma.DispatchError, match="cannot allocate"):
        rt.execute(enigma.compile(k_copy), inputs=[a], output_size=size, grid=64, threads=32)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is a Linux limit here")
def test_outputs_past_an_address_space_limit_are_dispatch_errors(tmp_path):
    # Under a 6 GiB address-space limit: 2.5 GiB and 3.5 GiB of output fit
    # once, and the result is the simulator's buffer itself, so both run
    # (the 3.5 GiB one did not while the result was a second copy); 6.5 GiB
    # does not fit at all, which must be a DispatchError, not a
    # PanicException or an abort.
    script = textwrap.dedent(
        """
        import resource, numpy as np, enigma
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        @enigma.kernel
        def k(A: enigma.f32, Out: enigma.f32):
            t = enigma.thread_position_in_grid("x")
            Out[t] = A[t]
        rt = enigma.MetalRuntime(device="cpu")
        for size in (5 << 29, 7 << 29, 13 << 29):
            try:
                rt.execute(enigma.compile(k), inputs=[np.ones(64, np.float32)], output_size=size, grid=64, threads=32)
                print("ok", size)
            except enigma.DispatchError as e:
                print("DispatchError", size, "cannot allocate" in str(e))
        """
    )
    out = _run_script(tmp_path, script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == [f"ok {5 << 29}", f"ok {7 << 29}", f"DispatchError {13 << 29} True"], out.stdout


@enigma.kernel
def k_sparse(stride: enigma.constant(enigma.u32), Out: enigma.u32):
    t = enigma.thread_position_in_grid("x")
    Out[t * stride] = t + 1


def test_an_output_is_a_read_only_view_that_numpy_shares():
    rt = enigma.MetalRuntime(device="cpu")
    n = 1 << 20
    a = np.arange(n, dtype=np.float32) - 7.5
    out = rt.execute(enigma.compile(k_copy), inputs=[a], output_size=n * 4, grid=n, threads=256)
    assert isinstance(out, memoryview) and out.readonly and out.format == "B" and len(out) == n * 4
    as_f32 = np.frombuffer(out, np.float32)
    np.testing.assert_array_equal(as_f32, a)
    whole = np.asarray(out)
    assert whole.dtype == np.uint8 and whole.shape == (n * 4,) and not whole.flags.writeable
    assert np.shares_memory(whole, as_f32)  # np.asarray views, never copies
    assert out == a.tobytes() and bytes(out[:8]) == a[:2].tobytes() and out[4] == a[1:2].tobytes()[0]
    # The memory lives as long as a view of it: the result outlives the
    # runtime's later dispatches and the collection of everything else.
    del out, whole
    again = rt.execute(enigma.compile(k_copy), inputs=[-a], output_size=n * 4, grid=n, threads=256)
    gc.collect()
    np.testing.assert_array_equal(as_f32, a)
    np.testing.assert_array_equal(np.frombuffer(again, np.float32), -a)


def test_a_sanitized_dispatch_returns_a_view_too():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    out = rt.execute(enigma.compile(k_sparse), inputs=[3], output_size=64 * 3 * 4, grid=64, threads=32)
    want = np.zeros(64 * 3, np.uint32)
    want[::3] = np.arange(1, 65)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint32), want)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in KiB on Linux")
def test_a_large_output_is_in_host_memory_once(tmp_path):
    # 512 MiB of output, of which the kernel writes one element in 65536:
    # the simulator's buffer is the result, so the process's peak memory
    # grows by about the output once (it grew by twice the output when the
    # result was a copy).
    size = 512 << 20
    script = textwrap.dedent(
        f"""
        import resource, numpy as np, enigma
        @enigma.kernel
        def k(stride: enigma.constant(enigma.u32), Out: enigma.u32):
            t = enigma.thread_position_in_grid("x")
            Out[t * stride] = t + 1
        c = enigma.compile(k)
        rt = enigma.MetalRuntime(device="cpu")
        rt.execute(c, inputs=[65536], output_size=16 << 16, grid=4, threads=4)  # everything loaded and warm
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out = rt.execute(c, inputs=[65536], output_size={size}, grid={size} // 4 // 65536, threads=64)
        view = np.asarray(out).view(np.uint32)
        assert view.size == {size} // 4
        assert np.array_equal(view[::65536], np.arange(1, view.size // 65536 + 1, dtype=np.uint32))
        assert np.count_nonzero(view) == view.size // 65536
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print((after - before) / {size})
        """
    )
    out = _run_script(tmp_path, script)
    assert out.returncode == 0, out.stderr
    growth = float(out.stdout.split()[-1])
    assert growth < 1.3, f"peak memory grew by {growth:.2f}× the output"


# --- runaway kernels (defect 2) ----------------------------------------------


@enigma.kernel
def k_endless(Out: enigma.u32):
    t = enigma.thread_position_in_grid("x")
    while True:
        Out[t] = Out[t] + 1


@enigma.kernel
def k_wraps(n: enigma.constant(enigma.u32), Out: enigma.u32):
    for i in range(n - 5, n, 7):
        Out[0] = i


def test_a_step_budget_stops_an_endless_loop_and_names_its_line():
    rt = enigma.MetalRuntime(device="cpu")
    with pytest.raises(enigma.DispatchError, match="step budget of 1000 loop iterations") as e:
        rt.execute(enigma.compile(k_endless), output_size=64 * 4, grid=64, threads=32, max_loop_iterations=1000)
    assert "test_reliability.py" in str(e.value), str(e.value)
    rt = enigma.MetalRuntime(device="cpu", max_loop_iterations=1 << 12)
    with pytest.raises(enigma.DispatchError, match="step budget"):
        rt.execute(enigma.compile(k_wraps), inputs=[2**32 - 1], output_size=4, grid=1, threads=1)
    # Within the budget the loop runs: n = 100 gives i = 95 only.
    out = rt.execute(enigma.compile(k_wraps), inputs=[100], output_size=4, grid=1, threads=1)
    assert np.frombuffer(out, np.uint32).tolist() == [95]


def test_a_timeout_stops_an_endless_dispatch():
    rt = enigma.MetalRuntime(device="cpu")
    with pytest.raises(enigma.DispatchError, match="timeout of 0.05 s"):
        rt.execute(enigma.compile(k_endless), output_size=64 * 4, grid=64, threads=32, timeout=0.05)
    for bad in (0, -1, float("nan"), "1"):
        with pytest.raises(enigma.DispatchError, match="timeout"):
            rt.execute(enigma.compile(k_endless), output_size=4, grid=1, threads=1, timeout=bad)


def test_ctrl_c_interrupts_a_dispatch(tmp_path):
    # SIGINT from a timer thread while the main thread waits in execute: a
    # KeyboardInterrupt, and the runtime works afterwards.
    script = textwrap.dedent(
        """
        import os, signal, threading, numpy as np, enigma
        @enigma.kernel
        def k(Out: enigma.u32):
            t = enigma.thread_position_in_grid("x")
            while True:
                Out[t] = Out[t] + 1
        @enigma.kernel
        def one(Out: enigma.u32):
            Out[0] = 1
        rt = enigma.MetalRuntime(device="cpu")
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            rt.execute(enigma.compile(k), output_size=256, grid=64, threads=32, timeout=120)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        print(np.frombuffer(rt.execute(enigma.compile(one), output_size=4, grid=1, threads=1), np.uint32)[0])
        """
    )
    out = _run_script(tmp_path, script)
    assert out.stdout.split() == ["interrupted", "1"], out.stdout + out.stderr


def test_a_runaway_dispatch_does_not_block_another_runtime():
    import threading

    events = []
    errors = []

    def runaway():
        rt = enigma.MetalRuntime(device="cpu")
        try:
            rt.execute(enigma.compile(k_endless), output_size=4096 * 4, grid=4096, threads=64, timeout=5)
        except enigma.DispatchError as e:
            errors.append(str(e))
        events.append("runaway stopped")

    t = threading.Thread(target=runaway)
    t.start()
    other = enigma.MetalRuntime(device="cpu")
    a = np.arange(1000, dtype=np.float32)
    out = other.execute(enigma.compile(k_copy), inputs=[a], output_size=4000, grid=1000, threads=32)
    events.append("other finished")
    t.join()
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), a)
    assert events == ["other finished", "runaway stopped"], events
    assert "timeout" in errors[0], errors


# --- float literals and arguments that round to infinity (defect 3) ----------


def test_float_literals_past_their_type_are_compile_errors():
    def k_f16(A: enigma.f16):
        A[0] = enigma.f16(70000.0)

    def k_f32(A: enigma.f32):
        A[0] = enigma.f32(1e39)

    for fn, ty in ((k_f16, "f16"), (k_f32, "f32")):
        with pytest.raises(enigma.CompileError, match=f"rounds to infinity.*{ty}|{ty}.*rounds to infinity"):
            enigma.compile(enigma.kernel(fn))


@enigma.kernel
def k_fill_f32(x: enigma.constant(enigma.f32), Out: enigma.f32):
    Out[enigma.thread_position_in_grid("x")] = x


def test_by_value_floats_past_their_type_are_dispatch_errors():
    rt = enigma.MetalRuntime(device="cpu")
    for bad in (1e300, 10**400, -(10**400)):
        with pytest.raises(enigma.DispatchError, match="does not fit in f32"):
            rt.execute(enigma.compile(k_fill_f32), inputs=[bad], output_size=4, grid=1, threads=1)
    out = rt.execute(enigma.compile(k_fill_f32), inputs=[float("inf")], output_size=4, grid=1, threads=1)
    assert np.frombuffer(out, np.float32)[0] == np.inf


# --- enigma.ops: logical lengths and argument errors (defects 6, 11) ---------

import enigma.ops as ops  # noqa: E402


@pytest.mark.parametrize("d, w_len", [(8, 7), (8, 3), (8, 9), (5, 4)])
def test_norm_weights_must_match_the_row_length(d, w_len):
    x = np.ones((4, d), np.float32)
    with pytest.raises(ValueError, match=f"`weight` has {w_len} elements"):
        ops.rms_norm(x, np.ones(w_len, np.float32), device="cpu")
    with pytest.raises(ValueError, match=f"`bias` has {w_len} elements"):
        ops.layer_norm(x, np.ones(d, np.float32), np.ones(w_len, np.float32), device="cpu")
    # The right length still works, against a numpy reference.
    w = np.arange(1, d + 1, dtype=np.float32)
    got = ops.rms_norm(x, w, device="cpu")
    np.testing.assert_allclose(got, np.tile(w, (4, 1)), rtol=1e-5)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda x: ops.softmax(x, threads=-32, device="cpu"), enigma.DispatchError, ["threads=-32", "multiple of 32"]),
        (lambda x: ops.softmax(x, threads=32.0, device="cpu"), TypeError, ["threads must be an int"]),
        (lambda x: ops.softmax(x, threads=2**40, device="cpu"), enigma.DispatchError, ["threads="]),
        (lambda x: ops.scale(x, "x", device="cpu"), TypeError, ["factor must be a number"]),
        (lambda x: ops.scale(x, 10**400, device="cpu"), ValueError, ["factor="]),
        (lambda x: ops.rms_norm(x, np.ones(8, np.float32), eps="1", device="cpu"), TypeError, ["eps must be a number"]),
        (lambda x: ops.attention_decode(np.ones((2, 0), np.float32), np.ones((2, 3, 0), np.float32),
                                        np.ones((2, 3, 0), np.float32), device="cpu"), ValueError, ["at least 1"]),
        (lambda x: ops.tune("softmax_f32", (-1, 8), device="cpu"), ValueError, ["shape"]),
        (lambda x: ops.tune("softmax_f32", "abc", device="cpu"), TypeError, ["shape"]),
        (lambda x: ops.tune("softmax_f32", (4, 8), repeats=2**32, device="cpu"), ValueError, ["repeats"]),
    ],
)
def test_library_argument_errors_name_the_parameter(call, error, words):
    x = np.ones((4, 8), np.float32)
    with pytest.raises(error) as e:
        call(x)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_a_huge_threadgroup_array_is_a_compile_error_naming_it():
    def k(A: enigma.f32):
        big = enigma.threadgroup_alloc("float", 2**32)
        big[0] = 1.0
        A[0] = big[0]

    with pytest.raises(enigma.CompileError, match="threadgroup array `big`"):
        enigma.compile(enigma.kernel(k))


# --- reports belong to their dispatch (defect 10) ----------------------------


@enigma.kernel
def k_racy_or_clean(flag: enigma.constant(enigma.u32), Out: enigma.u32):
    t = enigma.thread_position_in_grid("x")
    # flag = 1 leaves Out[1] unwritten: a coverage warning (no error).
    if t == 0 or flag == 0:
        Out[t] = t + 1


def test_last_report_is_per_thread_and_per_dispatch():
    import threading

    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    compiled = enigma.compile(k_racy_or_clean)
    mismatches = []

    def worker(flag):
        for _ in range(20):
            rt.execute(compiled, inputs=[flag], output_size=8, grid=2, threads=32)
            kinds = [f["kind"] for f in rt.last_report["findings"]]
            if kinds != (["coverage"] if flag else []):
                mismatches.append((flag, kinds))

    threads = [threading.Thread(target=worker, args=(i % 2,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mismatches == []
    # A failed dispatch leaves no stale report behind.
    with pytest.raises(enigma.DispatchError):
        rt.execute(compiled, inputs=[0], output_size=7, grid=2, threads=32)
    assert rt.last_report is None


# --- constant folding (defect 5) ---------------------------------------------


def _compile_error_of(fn):
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(enigma.kernel(fn))
    return str(e.value)


def test_constant_shifts_outside_0_to_63_are_errors_that_point_at_run_time_semantics():
    def k_neg(A: enigma.i32):
        A[0] = 1 << -1

    def k_huge(A: enigma.i32):
        A[0] = 1 << 100000

    for fn in (k_neg, k_huge):
        msg = _compile_error_of(fn)
        assert "constant shift" in msg and "between 0 and 63" in msg and "enigma.i32(1)" in msg, msg


def test_typed_shifts_fold_like_they_run():
    # `enigma.i32(1) << n` computes at run time; for every amount the result
    # is the amount modulo 32, as the simulator documents (and numpy's
    # int32 arithmetic with the same modulo gives).
    @enigma.kernel
    def k(n: enigma.constant(enigma.i32), A: enigma.i32):
        A[0] = enigma.i32(1) << n

    rt = enigma.MetalRuntime(device="cpu")
    for amount in (-1, 0, 5, 31, 32, 33, 100):
        got = np.frombuffer(rt.execute(enigma.compile(k), inputs=[amount], output_size=4, grid=1, threads=1), np.int32)[0]
        want = np.left_shift(np.int32(1), np.int32(amount % 32))
        assert got == want, (amount, got, want)


def test_constants_too_large_for_any_kernel_type_fail_at_once():
    def k_pow(A: enigma.i32):
        x = 7 ** 10 ** 8
        A[0] = x

    def k_mul(A: enigma.i64):
        A[0] = (1 << 63) * 4

    assert "too large for any kernel type" in _compile_error_of(k_pow)
    assert "does not fit any kernel integer type" in _compile_error_of(k_mul)


# --- inputs a Python user writes (defect 12) ---------------------------------


@enigma.kernel
def k_flag(flag: enigma.constant(enigma.bool_), Out: enigma.u32):
    if flag:
        Out[0] = 1


def test_numpy_bools_are_bools():
    rt = enigma.MetalRuntime(device="cpu")
    for value, want in ((np.bool_(True), 1), (np.bool_(False), 0), (True, 1)):
        out = rt.execute(enigma.compile(k_flag), inputs=[value], output_size=4, grid=1, threads=1)
        assert np.frombuffer(out, np.uint32)[0] == want
    with pytest.raises(enigma.DispatchError, match="expected a bool"):
        rt.execute(enigma.compile(k_flag), inputs=[1], output_size=4, grid=1, threads=1)


def test_unicode_identifiers_compile_and_run():
    @enigma.kernel
    def k(A: enigma.f32, Ω: enigma.f32):
        λ = A[0] * 2.0
        Ω[0] = λ

    compiled = enigma.compile(k)
    assert "u03a9" in compiled.ir and "u03bb" in compiled.ir
    rt = enigma.MetalRuntime(device="cpu")
    out = rt.execute(compiled, inputs=[np.array([1.5], np.float32)], output_size=4, grid=1, threads=1)
    assert np.frombuffer(out, np.float32)[0] == 3.0


def test_specialisation_constants_and_half_arguments_past_their_type_are_errors():
    @enigma.kernel
    def k(A: enigma.f32):
        T = enigma.spec("T", enigma.f32, 1.0)
        A[0] = T

    with pytest.raises(enigma.CompileError, match="rounds to infinity"):
        enigma.compile(k, T=1e300)
    assert enigma.compile(k, T=3.0e38).spec == {"T": 3.0e38}

    @enigma.kernel
    def k_half(x: enigma.constant(enigma.f16), A: enigma.f16):
        A[0] = x

    rt = enigma.MetalRuntime(device="cpu")
    with pytest.raises(enigma.DispatchError, match="rounds to infinity"):
        rt.execute(enigma.compile(k_half), inputs=[1e6], output_size=2, grid=1, threads=1)
    out = rt.execute(enigma.compile(k_half), inputs=[65504.0], output_size=2, grid=1, threads=1)
    assert np.frombuffer(out, np.float16)[0] == np.float16(65504.0)


# --- deep kernels (defect 4) -------------------------------------------------


def _kernel_from_source(tmp_path, name, body):
    """The function `k` of a module written from `body` (enigma reads a
    kernel's source, so generated kernels need a file)."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text("import enigma\n\n" + body)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


def test_deep_but_valid_kernels_compile_and_run(tmp_path):
    rt = enigma.MetalRuntime(device="cpu")
    a = np.arange(1, 61, dtype=np.float32)
    # A 60-term sum.
    terms = " + ".join(f"A[{i}]" for i in range(60))
    k = _kernel_from_source(tmp_path, "sum60", f"def k(A: enigma.f32, Out: enigma.f32):\n    Out[0] = {terms}\n")
    out = rt.execute(enigma.compile(k), inputs=[a], output_size=4, grid=1, threads=1)
    assert np.frombuffer(out, np.float32)[0] == a.sum()
    # 30 nested ifs: the innermost runs only where every condition holds.
    body = "def k(n: enigma.constant(enigma.u32), Out: enigma.u32):\n"
    for depth in range(30):
        body += "    " * (depth + 1) + f"if n > {depth}:\n"
    body += "    " * 31 + "Out[0] = 7\n"
    k = _kernel_from_source(tmp_path, "ifs30", body)
    for n, want in ((30, 7), (29, 0)):
        out = rt.execute(enigma.compile(k), inputs=[n], output_size=4, grid=1, threads=1)
        assert np.frombuffer(out, np.uint32)[0] == want
    # A 30-branch elif chain.
    body = "def k(n: enigma.constant(enigma.u32), Out: enigma.u32):\n    if n == 0:\n        Out[0] = 100\n"
    for i in range(1, 30):
        body += f"    elif n == {i}:\n        Out[0] = {100 + i}\n"
    k = _kernel_from_source(tmp_path, "elif30", body)
    compiled = enigma.compile(k)
    for n in (0, 17, 29):
        out = rt.execute(compiled, inputs=[n], output_size=4, grid=1, threads=1)
        assert np.frombuffer(out, np.uint32)[0] == 100 + n
    # The IR text of the nested ifs compiles back.
    assert enigma.compile_ir(compiled.ir).ir == compiled.ir


def test_nesting_past_the_irs_limit_is_a_compile_error_with_the_line(tmp_path):
    terms = " + ".join(["A[0]"] * 400)
    k = _kernel_from_source(tmp_path, "sum400", f"def k(A: enigma.f32):\n    A[1] = {terms}\n")
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(k)
    assert "sum400.py:4" in str(e.value) and "128 levels" in str(e.value), str(e.value)
