#!/usr/bin/env bash
# Type-checks the macOS-only Metal backend (and the runtime that opens it)
# and the Python extension's macOS build for Apple silicon:
# `cargo check --target aarch64-apple-darwin`. This needs
# only the target's standard library, no Apple SDK or linker, because
# `cargo check` does not link. It proves the code matches objc2-metal's API;
# it does not run anything on a GPU.
#
# The target is installed with rustup when it is missing, so the check runs
# every time. It is skipped (printing `check-metal: skipped: <reason>` and
# exiting 0) only where the target cannot be had: no rustup, or rustup could
# not install it (offline, say), with rustup's own words. Under CI (`CI` set
# to `true` or `1`, as `.ci/run` sets it) a skip is a failure: it prints the
# same reason and exits 1, so CI never passes without the check.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-apple-darwin
skip() {
  echo "check-metal: skipped: $1"
  case "${CI:-}" in
    true | 1)
      echo "check-metal: failed: CI=${CI} requires the Metal type-check, which could not run"
      exit 1
      ;;
  esac
  exit 0
}
if ! command -v rustup >/dev/null 2>&1; then
  skip "rustup is not installed, so the $target target cannot be installed"
fi
if ! rustup target list --installed | grep -qx "$target"; then
  echo "== rustup target add $target =="
  if ! out="$(rustup target add "$target" 2>&1)"; then
    echo "$out"
    skip "rustup could not install the $target target: $(tail -n 1 <<<"$out")"
  fi
fi
echo "== cargo check -p enigma-metal -p enigma-runtime --target $target --all-targets =="
cargo check -p enigma-metal -p enigma-runtime --target "$target" --all-targets
# The extension is an abi3 module (Python 3.9 and later), so PyO3 needs no
# macOS Python to check it: the version it builds against is enough.
echo "== cargo check -p enigma-python --target $target =="
PYO3_CROSS_PYTHON_VERSION=3.9 cargo check -p enigma-python --target "$target"
