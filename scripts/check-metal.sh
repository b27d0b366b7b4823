#!/usr/bin/env bash
# Type-checks the macOS-only Metal backend (and the runtime that opens it)
# for Apple silicon: `cargo check --target aarch64-apple-darwin`. This needs
# only the target's standard library (`rustup target add aarch64-apple-darwin`),
# no Apple SDK or linker, because `cargo check` does not link. It proves the
# code matches objc2-metal's API; it does not run anything on a GPU.
# Without the target installed it prints that it skipped, and why, and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-apple-darwin
if ! command -v rustup >/dev/null 2>&1; then
  echo "check-metal: skipped: rustup is not installed, so the $target target cannot be listed"
  exit 0
fi
installed="$(rustup target list --installed)"
if ! grep -qx "$target" <<<"$installed"; then
  echo "check-metal: skipped: the $target target is not installed (rustup target add $target)"
  exit 0
fi
echo "== cargo check -p enigma-metal -p enigma-runtime --target $target --all-targets =="
cargo check -p enigma-metal -p enigma-runtime --target "$target" --all-targets
