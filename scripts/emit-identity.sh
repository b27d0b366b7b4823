#!/usr/bin/env bash
# Byte-identity check of generated code: writes the MSL and CUDA C++ of every
# kernel `enigma emit --list` names (the seeds' kernels, every library
# variant) and of every `enigma run` example to a directory, and the IR text
# of the matrix kernels the selections choose over a grid of problems,
# devices and overrides (`cargo run -p enigma-kernels --example variant_ir`:
# stages, whole tiles, ragged rows, K splits, fragment order), and compares
# both with a baseline taken earlier.
#
#   scripts/emit-identity.sh save   # baseline -> target/emit-identity/baseline
#   scripts/emit-identity.sh check  # current  -> target/emit-identity/current, diffed
#
# A refactoring that must not change generated code runs `save` before it and
# `check` after each step; `check` exits non-zero and lists the files that
# differ when any output changed.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
root=target/emit-identity
case "$mode" in
  save) dir=$root/baseline; variants=$root/variants-baseline ;;
  check) dir=$root/current; variants=$root/variants-current ;;
  *) echo "usage: $0 save|check" >&2; exit 2 ;;
esac
cargo build -q -p enigma
bin=target/debug/enigma
rm -rf "$dir"
mkdir -p "$dir"
list=$("$bin" emit --list)
examples=$(printf '%s\n' "$list" | sed -n 's/^examples: //p' | tr -d ' ' | tr ',' '\n')
kernels=$(printf '%s\n' "$list" | sed -n 's/^  //p')
count=0
for name in $examples $kernels; do
  for target in msl cuda; do
    "$bin" emit --target "$target" "$name" > "$dir/$name.$target" 2>&1 || echo "exit $?" >> "$dir/$name.$target"
  done
  count=$((count + 1))
done
printf '%s\n' "$list" > "$dir/LIST"
echo "$mode: $count names, $(ls "$dir" | wc -l) files in $dir"
rm -rf "$variants"
cargo run -q -p enigma-kernels --example variant_ir -- "$variants"
if [ "$mode" = check ]; then
  [ -d "$root/baseline" ] || { echo "no baseline: run '$0 save' first" >&2; exit 2; }
  status=0
  for pair in "baseline $dir" "variants-baseline $variants"; do
    set -- $pair
    if diff -rq "$root/$1" "$2"; then
      echo "$2: identical to $root/$1"
    else
      echo "$2 differs from $root/$1 (diff -r $root/$1 $2)" >&2
      status=1
    fi
  done
  exit $status
fi
