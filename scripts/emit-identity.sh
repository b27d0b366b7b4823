#!/usr/bin/env bash
# Byte-identity check of generated code: writes the MSL and CUDA C++ of every
# kernel `enigma emit --list` names (the seeds' kernels, every library
# variant) and of every `enigma run` example to a directory, and compares it
# with a baseline taken earlier.
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
  save) dir=$root/baseline ;;
  check) dir=$root/current ;;
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
if [ "$mode" = check ]; then
  [ -d "$root/baseline" ] || { echo "no baseline: run '$0 save' first" >&2; exit 2; }
  if diff -rq "$root/baseline" "$dir"; then
    echo "identical to the baseline"
  else
    echo "generated code differs from the baseline (diff -r $root/baseline $dir)" >&2
    exit 1
  fi
fi
