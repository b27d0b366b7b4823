#!/usr/bin/env bash
# Runs enigma's CUDA tests and benchmarks on a machine with an NVIDIA GPU but
# no Rust toolchain, from test binaries and the cuda_bench binary built
# elsewhere and copied into one folder (default: devbin/), test binaries
# named test-*:
#
#   cargo test --release -p enigma-cuda -p enigma-runtime --no-run
#   cargo build --release -p enigma-bench --bin cuda_bench
#   (copy the test executables cargo names as devbin/test-<name>, and
#    target/release/cuda_bench as devbin/cuda_bench)
#   bash scripts/cuda-device.sh devbin
#
# With cargo on the GPU machine, `cargo test -p enigma-cuda` does the same.
# Logs go to $OUT (or ./cuda-device-logs) as well as the terminal.
set -uo pipefail
cd "$(dirname "$0")/.."
bins="${1:-devbin}"
logs="${OUT:-cuda-device-logs}"
mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# NVRTC and the CUDA headers (cuda_fp16.h) from the toolkit.
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.13* /usr/local/cuda-*/lib64/libnvrtc.so.13* 2>/dev/null | head -n 1)"
if [ -z "$nvrtc" ]; then
  nvrtc="$(find / -xdev -name 'libnvrtc.so.13*' 2>/dev/null | head -n 1)"
fi
export LD_LIBRARY_PATH="$(dirname "$nvrtc"):${LD_LIBRARY_PATH:-}"
header="$(ls /usr/local/cuda/include/cuda_fp16.h 2>/dev/null || find / -xdev -name cuda_fp16.h 2>/dev/null | head -n 1)"
export CUDA_HOME="$(dirname "$(dirname "$header")")"
echo "NVRTC: $nvrtc; CUDA_HOME: $CUDA_HOME"
status=0
# Every CUDA golden file of the code generator, through the real compiler.
if command -v nvcc > /dev/null; then
  compiled=0
  for snap in crates/enigma-codegen/tests/snapshots/*.cu.snap; do
    awk 'n >= 2 { print } /^---$/ && n < 2 { n++ }' "$snap" > /tmp/golden.cu
    if nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -c /tmp/golden.cu -o /tmp/golden.o 2> /tmp/golden.err; then
      compiled=$((compiled + 1))
    else
      echo "nvcc rejected $snap:"; head -n 20 /tmp/golden.err; status=1
    fi
  done
  echo "nvcc compiled $compiled CUDA golden files"
fi
for t in "$bins"/test-*; do
  echo "== $(basename "$t")"
  "$t" --test-threads=1 > "$logs/$(basename "$t").log" 2>&1
  rc=$?
  grep -E "^test result|FAILED|panicked|skipped" "$logs/$(basename "$t").log" | head -n 40
  [ "$rc" -eq 0 ] || status=1
done
if [ -x "$bins/cuda_bench" ]; then
  echo "== cuda_bench beside torch"
  PYTHONUNBUFFERED=1 python3 bench/cuda_vs_torch.py "$bins/cuda_bench" 28 2>&1 | tee "$logs/bench.txt"
fi
if [ -x "$bins/library_cuda" ]; then
  echo "== kernel library beside torch and Triton"
  (cd "$logs" && PYTHONUNBUFFERED=1 python3 "$OLDPWD/bench/library_vs_torch.py" "$OLDPWD/$bins/library_cuda" ${LIBRARY_FILTER:-}) 2>&1 | tee "$logs/library.txt"
fi
exit $status
