#!/usr/bin/env bash
# The whole test suite: clippy and rustdoc over the workspace with warnings
# as errors, every Rust crate (simulator conformance, codegen
# snapshots and their g++ syntax check, analysis tables, CLI), the Metal
# backend type-checked for macOS (scripts/check-metal.sh), then the Python
# package built as an abi3 wheel and tested with pytest in a fresh venv.
#
# It ends with a summary of what did not run for want of a device: GPU tests
# without their device (CUDA, Metal) pass after printing `skipped: <reason>`,
# and record one line each (enigma_conformance::skip) in the file that
# ENIGMA_SKIP_LOG names; this script counts them by crate and reason. The
# Metal type-check's own skip is counted too.
#
# The strict MSL check (enigma-codegen's tests/msl_strict.rs and
# enigma-conformance's) needs clang 14 or later; where clang++ is missing this
# script installs it with apt-get when it can (as root), else says why not.
set -euo pipefail
cd "$(dirname "$0")/.."

SKIP_LOG=$(mktemp "${TMPDIR:-/tmp}/enigma-skips.XXXXXX")
METAL_LOG=$(mktemp "${TMPDIR:-/tmp}/enigma-check-metal.XXXXXX")
trap 'rm -f "$SKIP_LOG" "$METAL_LOG"' EXIT
export ENIGMA_SKIP_LOG=$SKIP_LOG

echo "== cargo clippy (workspace, warnings are errors) =="
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --all-features -- -D warnings
else
  echo "clippy: skipped: cargo clippy is not installed (rustup component add clippy)"
fi
echo "== cargo doc (workspace, warnings are errors: broken links) =="
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --exclude enigma-python --quiet
echo "== clang for the strict MSL check =="
if command -v clang++ >/dev/null 2>&1; then
  clang++ --version | head -n 1
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -qq clang >/dev/null || echo "strict MSL check: apt-get install clang failed; its tests will say they skipped"
else
  echo "strict MSL check: clang++ is not installed and cannot be installed here (needs root and apt-get); its tests will say they skipped"
fi
echo "== cargo test (workspace) =="
cargo test --workspace --exclude enigma-python --all-features
echo "== Metal backend type-check for aarch64-apple-darwin =="
bash scripts/check-metal.sh | tee "$METAL_LOG"
if [ -f python/build_and_test.sh ]; then
  echo "== python package =="
  bash python/build_and_test.sh
fi

bash scripts/skip-summary.sh "$SKIP_LOG"
if grep -q '^check-metal: skipped: ' "$METAL_LOG"; then
  echo "  the Metal type-check: $(grep -m1 '^check-metal: skipped: ' "$METAL_LOG" | sed 's/^check-metal: skipped: //')"
fi
