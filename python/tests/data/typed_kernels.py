"""A user's file as a type checker sees it: kernels defined with enigma's
annotations, compiled, launched and checked, and enigma.ops called.
python/tests/test_typed_surface.py runs it, and runs `mypy --strict` on it."""

from typing import Annotated

import numpy as np
import numpy.typing as npt

import enigma
import enigma.ops


@enigma.kernel
def scaled_add(
    a: enigma.f32,
    b: enigma.f32,
    out: Annotated[enigma.f32, enigma.buffer(enigma.f32, access="read_write")],
    n: Annotated[enigma.u32, enigma.constant(enigma.u32)],
    factor: enigma.Constant[enigma.f32],
) -> None:
    i = enigma.thread_position_in_grid
    if i < n:
        out[i] = enigma.fma(a[i], factor, b[i])


@enigma.kernel
def row_sums(x: Annotated[enigma.f32, enigma.buffer(enigma.f32, shape=(None, 32))], sums: enigma.f32) -> None:
    row = enigma.threadgroup_position_in_grid("x")
    lane = enigma.thread_index_in_simdgroup()
    total = enigma.simd_sum(x[row, lane])
    if enigma.simd_is_first():
        sums[row] = total + enigma.fast.exp(0.0) - 1.0


PRODUCT = enigma.matmul2d(enigma.matmul2d_descriptor(32, 32, 16), enigma.execution_simdgroup)


@enigma.kernel
def scaled_product(a_in: enigma.f16, b_in: enigma.f16, c_out: enigma.f32) -> None:
    """32 × 32 = (32 × 16)(16 × 32) on cooperative tensors, each element
    then scaled by (1 + its row), and 1 added along the diagonal."""
    a = enigma.tensor(a_in, (16, 32))
    b = enigma.tensor(b_in, (32, 16))
    c = PRODUCT.get_destination_cooperative_tensor(a, b, enigma.f32)
    PRODUCT.run(a, b, c)
    c.map(lambda v, col, row: v * (enigma.f32(row) + 1.0))
    for i in range(c.get_capacity()):
        if c.is_valid_element(i):
            at = c.get_multidimensional_index(i)
            if at.x == at.y:
                c[i] = c[i] + 1.0
    c.store(enigma.tensor(c_out, (32, 32)))


WEIGHTS = enigma.matmul2d(enigma.matmul2d_descriptor(32, 32, 32), enigma.execution_simdgroup)


@enigma.kernel
def dequantized_product(words: enigma.u32, scales: enigma.f16, b_in: enigma.f32, c_out: enigma.f32) -> None:
    """(32 × 32 INT4 weights, one group of 32 per column, transposed) ×
    (32 × 32): the weights dequantized into the product's left input."""
    b = enigma.tensor(b_in, (32, 32))
    w = WEIGHTS.get_left_input_cooperative_tensor(enigma.f32)
    w.dequantize("int4", words, 0, 32, scales, 0, 32, 5)
    c = WEIGHTS.get_destination_cooperative_tensor(w, b, enigma.f32)
    WEIGHTS.run(w, b, c)
    c.store(enigma.tensor(c_out, (32, 32)))


def run() -> float:
    """Runs the four kernels (the last two on cooperative tensors, under
    the sanitizer) and two library operations; the largest error against
    numpy (relative for the products)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(100).astype(np.float32)
    b = rng.standard_normal(100).astype(np.float32)
    out = np.zeros(100, np.float32)
    compiled: enigma.CompiledKernel = enigma.compile(scaled_add)
    compiled(a, b, out, 100, 0.5, grid=128, threads=32, device="sim")
    errors = [float(np.max(np.abs(out - (a * 0.5 + b))))]

    x = rng.standard_normal((4, 32)).astype(np.float32)
    rt = enigma.MetalRuntime("sim")
    raw = rt.execute(enigma.compile(row_sums), inputs=[x], output_size=4 * 4, threadgroups=(4, 1, 1), threads=(32, 1, 1))
    errors.append(float(np.max(np.abs(np.frombuffer(raw, np.float32) - x.sum(axis=1)))))

    y: npt.NDArray[np.float32] = enigma.ops.softmax(x, rt=rt)
    errors.append(float(np.max(np.abs(y - np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)))))
    s = enigma.ops.rms_norm(x, np.ones(32, np.float32), eps=1e-5, device="sim")
    errors.append(float(np.max(np.abs(s - x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5)))))
    a16 = rng.standard_normal((32, 16)).astype(np.float16)
    b16 = rng.standard_normal((16, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    enigma.MetalRuntime("sim", sanitize=True).execute(enigma.compile(scaled_product), inputs=[a16, b16], outputs=[c], grid=32, threads=32)
    want = (a16.astype(np.float64) @ b16.astype(np.float64)) * (np.arange(32)[:, None] + 1.0) + np.eye(32)
    errors.append(float(np.max(np.abs(c - want)) / np.max(np.abs(want))))

    # Nibble k % 8 of word (k // 8) * 32 + n is weight (k, n), its value the nibble minus 8.
    nibbles = rng.integers(0, 16, size=(32, 32)).astype(np.uint32)
    words = np.zeros(4 * 32, np.uint32)
    for k in range(32):
        words[(k // 8) * 32:][:32] |= nibbles[k] << np.uint32(4 * (k % 8))
    scales = rng.uniform(0.5, 2.0, 32).astype(np.float16)
    right = rng.standard_normal((32, 32)).astype(np.float32)
    enigma.MetalRuntime("sim", sanitize=True).execute(enigma.compile(dequantized_product), inputs=[words, scales, right], outputs=[c], grid=32, threads=32)
    weights = (nibbles.astype(np.float64) - 8.0) * scales.astype(np.float64)
    want = weights.T @ right.astype(np.float64)
    errors.append(float(np.max(np.abs(c - want)) / np.max(np.abs(want))))
    return max(errors)


if __name__ == "__main__":
    print(run())
