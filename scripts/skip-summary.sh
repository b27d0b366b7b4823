#!/usr/bin/env bash
# Prints how many tests were skipped for want of a device, by crate and
# reason, from a skip log: the file ENIGMA_SKIP_LOG named while the tests ran,
# one line `enigma-skip<TAB>crate<TAB>test<TAB>reason` per skipped test
# (enigma_conformance::skip writes them). scripts/test.sh ends with it.
#
#   ENIGMA_SKIP_LOG=/tmp/skips cargo test -p enigma-cuda; bash scripts/skip-summary.sh /tmp/skips
set -euo pipefail
log=${1:?usage: skip-summary.sh SKIP_LOG}
[ -f "$log" ] || { echo "skip-summary: no skip log at $log" >&2; exit 2; }
total=$(grep -c $'^enigma-skip\t' "$log" || true)
echo "== summary: $total test(s) skipped for want of a device (they print \`skipped: <reason>\` and count as passed) =="
[ "$total" -eq 0 ] && exit 0
# One line per crate and reason, most first.
grep $'^enigma-skip\t' "$log" |
  awk -F'\t' '{ n[$2 "\t" $4]++ } END { for (k in n) { split(k, f, "\t"); printf "  %d in %s: %s\n", n[k], f[1], f[2] } }' |
  sort -rn
