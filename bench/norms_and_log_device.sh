#!/usr/bin/env bash
# The short-row norms and the half-precision `log` on a CUDA GPU without a
# Rust toolchain, from files built elsewhere and copied into one folder
# (default devbin/norms):
#
#   cargo test --release -q -p enigma-cuda --test library --no-run
#   (copy the newest target/release/deps/library-* that is not a .d file,
#    stripped, as <folder>/library_test)
#   bash python/build_and_test.sh   (copy target/python/wheels/*.whl into <folder>)
#   bash bench/norms_and_log_device.sh devbin/norms   (from the repository root;
#     the script may be run from a copy in <folder>)
#
# 1. The CUDA library test for the norm and log entries (every awkward shape
#    of the registry, scalar and chosen kernels) and `log` of every finite
#    positive f16 and bf16 value against f64 `ln`.
# 2. The `enigma.ops` rows of bench/library_vs_torch.py --ops whose names hold
#    "norm" or "log" (RMSNorm/LayerNorm over (32, 32) of 64×64×32×32, over
#    (8192,), `log`, `log_softmax`), beside torch eager in the same run.
# Logs go to $OUT (or ./norms-and-log-logs).
set -uo pipefail
if [ ! -f bench/library_vs_torch.py ]; then
  echo "bench/norms_and_log_device.sh: run it from the repository root" >&2
  exit 2
fi
repo="$(pwd)"
bins="${1:-devbin/norms}"
logs="${OUT:-norms-and-log-logs}"
mkdir -p "$logs"
nvrtc="$(ls /usr/local/cuda/lib64/libnvrtc.so.13* 2>/dev/null | head -n 1)"
export LD_LIBRARY_PATH="$(dirname "$nvrtc"):${LD_LIBRARY_PATH:-}"
export CUDA_HOME=/usr/local/cuda
status=0
ENIGMA_LIBRARY_FILTER=rms_norm,layer_norm,log_ "$bins/library_test" every_library_kernel log_of_every_half_value --test-threads 1 2>&1 | tee "$logs/library_test.log" || status=1
pip install -q --no-deps --target /tmp/enigma_pkg "$bins"/*.whl 2>&1 | tee "$logs/pip.log"
(cd "$logs" && PYTHONPATH=/tmp/enigma_pkg python3 "$repo/bench/library_vs_torch.py" none --ops norm log) 2>&1 | tee "$logs/ops_norms_log.txt" || status=1
exit $status
