#!/usr/bin/env bash
# The sanitizer corpus on a CUDA GPU under NVIDIA's compute-sanitizer, to set
# beside what enigma's own sanitizer reports on the simulator. Needs the
# corpus_cuda binary, built where cargo is:
#
#   cargo build --release -p enigma-bench --bin corpus_cuda
#   mkdir -p devbin && cp target/release/corpus_cuda devbin/ && strip devbin/corpus_cuda
#   bash scripts/compute-sanitizer-corpus.sh devbin      # on the GPU machine
#
# For every corpus entry it runs the buggy kernel, then the fixed one, under
# racecheck, initcheck, synccheck and memcheck, and prints a table: the
# number of errors each tool reported (racecheck: hazards, errors + warnings).
# Entries whose divergent barrier enigma's validation rejects are not
# launched (on a GPU such a barrier can hang the kernel). The table also goes
# to $OUT/compute_sanitizer.txt when OUT is set.
set -uo pipefail
cd "$(dirname "$0")/.."
bins="${1:-devbin}"
bin="$bins/corpus_cuda"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
work="$(mktemp -d)"
tools="racecheck initcheck synccheck memcheck"

"$bin" list > "$work/list"
jobs=()
while IFS=$'\t' read -r name class kind launch; do
  [ "$launch" = launch ] || continue
  for variant in buggy fixed; do
    for tool in $tools; do
      jobs+=("$name $variant $tool")
    done
  done
done < "$work/list"

run_one() {
  local name=$1 variant=$2 tool=$3 flag=""
  [ "$variant" = fixed ] && flag="--fixed"
  "$sanitizer" --tool "$tool" --print-limit 5 "$bin" "$name" $flag > "$work/$name.$variant.$tool" 2>&1
}
export -f run_one
export sanitizer bin work
printf '%s\n' "${jobs[@]}" | xargs -P 8 -n 3 bash -c 'run_one "$0" "$1" "$2"'

count() { # errors a tool reported in one log
  local log=$1
  local n
  n=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | grep -oE '[0-9]+' | head -n 1)
  [ -n "$n" ] || n=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" | grep -oE '[0-9]+' | head -n 1)
  [ -n "$n" ] || n="?"
  echo "$n"
}

table="$work/table"
{
  printf '%-40s %-18s %-7s %9s %9s %9s %9s\n' entry "enigma finds" variant racecheck initcheck synccheck memcheck
  while IFS=$'\t' read -r name class kind launch; do
    if [ "$launch" != launch ]; then
      printf '%-40s %-18s %-7s %s\n' "$name" "$kind" "-" "not launched: enigma's validation rejects the divergent barrier"
      continue
    fi
    for variant in buggy fixed; do
      printf '%-40s %-18s %-7s' "$name" "$kind" "$variant"
      for tool in $tools; do printf ' %9s' "$(count "$work/$name.$variant.$tool")"; done
      printf '\n'
    done
  done < "$work/list"
} > "$table"
cat "$table"
if [ -n "${OUT:-}" ]; then
  cp "$table" "$OUT/compute_sanitizer.txt"
  tar -czf "$OUT/compute_sanitizer_logs.tgz" -C "$work" .
fi
