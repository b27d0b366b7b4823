#!/usr/bin/env bash
# The whole test suite: every Rust crate (simulator conformance, codegen
# snapshots and their g++ syntax check, analysis tables, CLI), the Metal
# backend type-checked for macOS (scripts/check-metal.sh), then the Python
# package built as an abi3 wheel and tested with pytest in a fresh venv.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo test (workspace) =="
cargo test --workspace --exclude enigma-python --all-features
echo "== Metal backend type-check for aarch64-apple-darwin =="
bash scripts/check-metal.sh
if [ -f python/build_and_test.sh ]; then
  echo "== python package =="
  bash python/build_and_test.sh
fi
