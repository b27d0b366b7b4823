#!/usr/bin/env bash
# The main job: the seed-001 two-pass reduction of 2^20 floats and the
# seed-000 kernels on the default device (Metal, else CUDA, else the
# simulator), each checked against a CPU reference.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p enigma -- run all --device auto
