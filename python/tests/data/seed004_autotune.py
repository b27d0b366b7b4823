import time
import mlx.core as mx

def autotune_threadgroup(kernel, inputs, grid, output_shapes, output_dtypes,
                         candidates=(32, 64, 128, 256, 512, 1024),
                         warmup=3, iters=10):
    best_tgx, best_time = 256, float("inf")
    for tgx in candidates:
        if tgx > grid[0]:
            continue
        # Warmup
        for _ in range(warmup):
            out = kernel(inputs=inputs, grid=grid, threadgroup=(tgx, 1, 1),
                         output_shapes=output_shapes, output_dtypes=output_dtypes)
            mx.eval(out)
        # Timed
        mx.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            out = kernel(inputs=inputs, grid=grid, threadgroup=(tgx, 1, 1),
                         output_shapes=output_shapes, output_dtypes=output_dtypes)
            mx.eval(out)
        mx.synchronize()
        dt = (time.perf_counter() - t0) / iters
        if dt < best_time:
            best_time, best_tgx = dt, tgx
    return best_tgx
