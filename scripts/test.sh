#!/usr/bin/env bash
# The whole test suite: every Rust crate (simulator conformance, codegen
# snapshots and their g++ syntax check, analysis tables, CLI), then the Python
# package built as an abi3 wheel and tested with pytest in a fresh venv.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo test (workspace) =="
cargo test --workspace --exclude enigma-python --all-features
if [ -f python/build_and_test.sh ]; then
  echo "== python package =="
  bash python/build_and_test.sh
fi
