#!/usr/bin/env bash
# The sanitizer corpus (enigma_testing::corpus) on a CUDA GPU under
# NVIDIA's compute-sanitizer, to set beside what enigma's own sanitizer
# reports on the simulator (`enigma check corpus/<name>`).
#
# Build where cargo is (the GPU machine needs no Rust), then copy and run:
#
#   cargo build --release -p enigma-bench --bin corpus_cuda
#   mkdir -p devbin && cp target/release/corpus_cuda devbin/ && strip devbin/corpus_cuda
#   bash scripts/compute-sanitizer-corpus.sh devbin      # on the GPU machine
#
# (devbin/ is git-ignored; the argument is the folder holding corpus_cuda,
# relative to the repository root or absolute.) On the GPU machine it needs the CUDA driver,
# NVRTC (libnvrtc, found through LD_LIBRARY_PATH=/usr/local/cuda/lib64, set
# here) and compute-sanitizer (on PATH, or $CUDA_HOME/bin).
#
# What it does:
#  1. `corpus_cuda list` gives the entries; then one plain run (no sanitizer)
#     checks that CUDA works — if it does not, it stops with corpus_cuda's
#     message and exit status 1 instead of printing a table of zeros.
#  2. Every buggy variant that enigma's validation accepts, and every fixed
#     variant, runs once under each of racecheck, initcheck, synccheck and
#     memcheck (JOBS at a time, default 8; each run killed after RUN_TIMEOUT
#     seconds, default 120). The buggy variants of the divergent-barrier
#     entries are not launched: validation rejects them, and on a GPU such a
#     barrier can hang.
#  3. It prints a table, one row per entry and variant: the kind enigma's
#     sanitizer reports for the buggy variant, how the program's own runs
#     ended (completed / runtime error under which tools), and per tool the
#     number of errors compute-sanitizer reported (its "ERROR SUMMARY: N
#     errors" line; racecheck: "RACECHECK SUMMARY: N hazards") with the kind
#     of its first error (race:W>R = write then read, oob/uninit = invalid or
#     uninitialised access of global/shared memory, barrier = synccheck,
#     CUDA_ERROR_… = the error the program then hit). "-" = not run,
#     "timeout" = killed, "?" = no summary line (see the log). Below the
#     table: each first error line in full, the runtime errors, the fixed
#     variants that were not clean, totals, and NVRTC compile times.
#
# Output: stdout, and $OUT/compute_sanitizer.txt plus every log in
# $OUT/compute_sanitizer_logs.tgz when OUT is set. Exit status 0 when the
# table was made (whatever the tools found), 1 when it could not be.
# COMPUTE_SANITIZER=<path> picks the compute-sanitizer binary.
set -uo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
bins="${1:-devbin}"
bin="$bins/corpus_cuda"
jobs_at_once="${JOBS:-8}"
run_timeout="${RUN_TIMEOUT:-120}"
tools="racecheck initcheck synccheck memcheck"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export LD_LIBRARY_PATH="$CUDA_HOME/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

die() { echo "compute-sanitizer-corpus: $*" >&2; exit 1; }

[ -x "$bin" ] || die "no executable $bin (build and copy it as the top of this script says, then pass its folder)"
sanitizer="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")}"
[ -x "$sanitizer" ] || die "compute-sanitizer not found (not on PATH, not at $CUDA_HOME/bin); set COMPUTE_SANITIZER=<path>"
command -v timeout > /dev/null || die "needs timeout(1) (coreutils)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" list > "$work/list" || die "$bin list failed"
[ -s "$work/list" ] || die "$bin list printed no entries"

# 1. Does CUDA work at all? One plain run of a fixed kernel.
probe=$(head -n 1 "$work/list" | cut -f 1)
probe_out=$("$bin" "$probe" --fixed 2>&1)
probe_rc=$?
[ "$probe_rc" -eq 0 ] || die "CUDA is not usable here (corpus_cuda exit $probe_rc): $probe_out"

# 2. Every run, JOBS at a time. A job is three words: entry, variant, tool.
jobs=()
while IFS=$'\t' read -r name _class _kind launch; do
  for variant in buggy fixed; do
    [ "$variant" = buggy ] && [ "$launch" != launch ] && continue
    for tool in $tools; do jobs+=("$name $variant $tool"); done
  done
done < "$work/list"

run_one() {
  local name=$1 variant=$2 tool=$3 flag=""
  [ "$variant" = fixed ] && flag="--fixed"
  timeout -k 10 "$run_timeout" "$sanitizer" --tool "$tool" --print-limit 20 "$bin" "$name" $flag \
    > "$work/$name.$variant.$tool.log" 2>&1
  echo $? > "$work/$name.$variant.$tool.rc"
}
export -f run_one
export sanitizer bin work run_timeout
printf '%s\n' "${jobs[@]}" | xargs -P "$jobs_at_once" -n 3 bash -c 'run_one "$0" "$1" "$2"'

# 3. Reading the logs.
count() { # errors one tool reported in one log, or - / timeout / ?
  local base=$1 n
  [ -f "$base.log" ] || { echo "-"; return; }
  case "$(cat "$base.rc")" in 124|137) echo timeout; return ;; esac
  n=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazard' "$base.log" | grep -oE '[0-9]+' | head -n 1)
  [ -n "$n" ] || n=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$base.log" | grep -oE '[0-9]+' | head -n 1)
  echo "${n:-?}"
}

first_error() { # the first error line of a log, without the ========= prefix
  awk '
    /^=========/ {
      s = $0; sub(/^========= ?/, "", s)
      if (race != "") { sub(/^[ \t]+/, "", s); print race " " s; exit }
      if (s ~ /^[ \t]/ || s == "" || s ~ /^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)/) next
      if (s ~ /Race reported between/) { race = s; next }
      print s; exit
    }' "$1"
}

short_kind() { # a few words for the table cell from a first error line
  awk '{
    s = $0
    if (match(s, /Race reported between [A-Za-z]+ access/)) {
      a = substr(s, RSTART + 22, 1)
      b = "?"; if (match(s, /and [A-Za-z]+ access/)) b = substr(s, RSTART + 4, 1)
      k = "race:" a ">" b; if (s ~ /^Warning/) k = k "(warn)"; print k; exit
    }
    if (match(s, /^Invalid __[a-z]+__ [a-z]+/)) { split(substr(s, RSTART, RLENGTH), w, " "); gsub(/_/, "", w[2]); print "oob " w[2] " " w[3]; exit }
    if (match(s, /^Uninitialized __[a-z]+__/)) { split(substr(s, RSTART, RLENGTH), w, " "); gsub(/_/, "", w[2]); print "uninit " w[2]; exit }
    if (s ~ /^Barrier error/) { print "barrier"; exit }
    if (match(s, /CUDA_ERROR_[A-Z_]+/)) { print substr(s, RSTART, RLENGTH); exit }
    n = split(s, w, " "); k = w[1]; if (n > 1) k = k " " w[2]; print k; exit
  }'
}

cell() { # count, and the kind of the first error when there is one
  local base=$1 n
  n=$(count "$base")
  if [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ]; then
    echo "$n $(first_error "$base.log" | short_kind)"
  else
    echo "$n"
  fi
}

outcome() { # how the program's own runs of one variant ended, over the tools
  local name=$1 variant=$2 errs="" tool
  [ "$variant" = buggy ] && [ ! -f "$work/$name.buggy.memcheck.log" ] && { echo "not launched"; return; }
  for tool in $tools; do
    grep -q ': launched, completed' "$work/$name.$variant.$tool.log" 2>/dev/null || errs="$errs${errs:+,}${tool%check}"
  done
  if [ -z "$errs" ]; then echo completed; else echo "error:$errs"; fi
}

table="$work/table.txt"
{
  echo "compute-sanitizer corpus run, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || echo unknown)"
  echo "compute-sanitizer: $("$sanitizer" --version 2>/dev/null | grep -iE 'version' | head -n 1)"
  echo "probe (plain run, no sanitizer): $probe_out"
  echo
  printf '%-40s %-18s %-6s %-16s %-18s %-18s %-18s %-18s\n' entry "enigma finds" var "program" racecheck initcheck synccheck memcheck
  while IFS=$'\t' read -r name _class kind _launch; do
    for variant in buggy fixed; do
      printf '%-40s %-18s %-6s %-16s' "$name" "$kind" "$variant" "$(outcome "$name" "$variant")"
      for tool in $tools; do printf ' %-18s' "$(cell "$work/$name.$variant.$tool")"; done
      printf '\n'
    done
  done < "$work/list"

  echo
  echo "first error line of each run that reported errors:"
  for log in "$work"/*.log; do
    n=$(count "${log%.log}")
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ] || continue
    printf '  %s: %s\n' "$(basename "${log%.log}")" "$(first_error "$log" | cut -c 1-160)"
  done
  echo
  echo "runs whose program did not complete (timeouts, runtime errors, no summary line):"
  for log in "$work"/*.log; do
    base=${log%.log}
    grep -q ': launched, completed' "$log" && [[ "$(count "$base")" =~ ^[0-9]+$ ]] && continue
    line=$(grep -E ': (launched|not launched)' "$log" | head -n 1)
    printf '  %s (exit %s, %s errors): %s\n' "$(basename "$base")" "$(cat "$base.rc")" "$(count "$base")" "${line:-no line from corpus_cuda}" | cut -c 1-200
  done
  echo

  buggy=0 buggy_found=0 fixed=0 fixed_clean=0 unclean=""
  while IFS=$'\t' read -r name _class _kind _launch; do
    for variant in buggy fixed; do
      [ -f "$work/$name.$variant.memcheck.log" ] || continue
      any=0
      for tool in $tools; do
        n=$(count "$work/$name.$variant.$tool")
        [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -eq 0 ] || any=1
      done
      if [ "$variant" = buggy ]; then
        buggy=$((buggy + 1)); buggy_found=$((buggy_found + any))
      else
        fixed=$((fixed + 1)); fixed_clean=$((fixed_clean + 1 - any))
        [ "$any" -eq 1 ] && unclean="$unclean $name"
      fi
    done
  done < "$work/list"
  echo "buggy variants launched: $buggy; compute-sanitizer reported something (or did not finish) on $buggy_found"
  echo "fixed variants launched: $fixed; clean under all four tools: $fixed_clean${unclean:+ (not clean:$unclean)}"
  compile=$(grep -ohE 'compile [0-9.]+ ms' "$work"/*.log | grep -oE '[0-9.]+' | sort -n)
  if [ -n "$compile" ]; then
    echo "NVRTC compile + module load per process, under the tools: median $(echo "$compile" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ms, max $(echo "$compile" | tail -n 1) ms"
  fi
  echo "${#jobs[@]} compute-sanitizer runs, $((SECONDS - started)) s in all ($jobs_at_once at a time)"
} > "$table"

cat "$table"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp "$table" "$OUT/compute_sanitizer.txt"
  tar -czf "$OUT/compute_sanitizer_logs.tgz" -C "$work" --exclude table.txt .
fi
