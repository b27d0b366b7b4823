#!/usr/bin/env bash
# The main job: the seed-001 two-pass reduction of 2^20 floats and the
# seed-000 kernels on the default device (Metal, else CUDA, else the
# simulator), each checked against a CPU reference.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building the enigma command-line tool (release; the first build compiles the workspace, about two minutes) ==" >&2
cargo build --release -p enigma
echo "== enigma run all --device auto ==" >&2
./target/release/enigma run all --device auto
