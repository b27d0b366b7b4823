"""Issue 18: bad or unusual inputs end in the documented exceptions, never a
panic, an abort or a hang — allocations sized by the caller, runaway
kernels, reports per dispatch, argument errors naming the parameter."""

from __future__ import annotations

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


# --- allocations (defect 1) -------------------------------------------------


@pytest.mark.parametrize("size", [2**64, 2**70, 1 << 52])
def test_outputs_no_machine_holds_are_dispatch_errors(size):
    rt = enigma.MetalRuntime(device="cpu")
    a = np.ones(64, np.float32)
    with pytest.raises(enigma.DispatchError, match="cannot allocate"):
        rt.execute(enigma.compile(k_copy), inputs=[a], output_size=size, grid=64, threads=32)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is a Linux limit here")
def test_outputs_past_an_address_space_limit_are_dispatch_errors():
    # Under a 6 GiB address-space limit: 2.5 GiB fits on the device but not
    # twice (device + result), 3.5 GiB not even once. Both must be
    # DispatchErrors, not a PanicException or an abort.
    script = textwrap.dedent(
        """
        import resource, numpy as np, enigma
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        @enigma.kernel
        def k(A: enigma.f32, Out: enigma.f32):
            t = enigma.thread_position_in_grid("x")
            Out[t] = A[t]
        rt = enigma.MetalRuntime(device="cpu")
        for size in (5 << 29, 7 << 29):
            try:
                rt.execute(enigma.compile(k), inputs=[np.ones(64, np.float32)], output_size=size, grid=64, threads=32)
                print("ok", size)
            except enigma.DispatchError as e:
                print("DispatchError", size, "cannot allocate" in str(e))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert f"DispatchError {7 << 29} True" in lines, out.stdout
    assert lines[0] in (f"ok {5 << 29}", f"DispatchError {5 << 29} True"), out.stdout


def test_a_large_output_is_returned_without_extra_copies():
    # The result object is the only host copy: 64 MiB of output, checked.
    rt = enigma.MetalRuntime(device="cpu")
    n = 1 << 24
    a = np.arange(n, dtype=np.float32)
    out = rt.execute(enigma.compile(k_copy), inputs=[a], output_size=n * 4, grid=n, threads=256)
    assert isinstance(out, bytes)
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), a)
