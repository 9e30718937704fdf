#!/usr/bin/env bash
# Runs `make test` (or the command after --) N times in a row, to find tests
# that fail only now and then.
#
#   scripts/stress-test.sh N [--load] [--out DIR] [-- command...]
#
# --load keeps both cores busy for the whole loop with two busy shell loops
# (started here, ended here by their PIDs), as a shared CI machine may be.
# Each run's output goes to DIR/run-K.log (DIR defaults to a new directory
# under ${TMPDIR:-/tmp}); DIR/summary lists every run's result and
# duration. The exit status is 0 only when every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 N [--load] [--out DIR] [-- command...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
n=$1
shift
[[ $n =~ ^[1-9][0-9]*$ ]] || usage
load=0
out=
cmd=(make test)
while [ $# -gt 0 ]; do
  case $1 in
  --load) load=1 ;;
  --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
  --) shift; [ $# -gt 0 ] || usage; cmd=("$@"); break ;;
  *) usage ;;
  esac
  shift
done
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/kvwire-stress.XXXXXX")
fi
mkdir -p "$out"

hogs=()
stop_hogs() {
  local p
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
  hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
if [ "$load" = 1 ]; then
  for _ in 1 2; do
    sh -c 'while :; do :; done' &
    hogs+=($!)
  done
fi

mode=idle
[ "$load" = 1 ] && mode=loaded
echo "stress-test: $n runs of '${cmd[*]}' ($mode), logs in $out" | tee "$out/summary"
fail=0
for ((k = 1; k <= n; k++)); do
  t0=$(date +%s)
  "${cmd[@]}" >"$out/run-$k.log" 2>&1
  rc=$?
  secs=$(($(date +%s) - t0))
  if [ "$rc" = 0 ]; then
    res=pass
  else
    res="FAIL (exit $rc)"
    fail=$((fail + 1))
  fi
  printf 'run %d: %s in %ds (%s, load average %s)\n' "$k" "$res" "$secs" "$mode" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/summary"
  if [ "$rc" != 0 ]; then
    # The lines that say what failed, for the summary; the log has the rest.
    grep -E -- '^(--- FAIL|FAIL|panic:)|_test\.go:[0-9]+:' "$out/run-$k.log" | head -20 | sed 's/^/    /' | tee -a "$out/summary"
  fi
done
echo "stress-test: $((n - fail)) of $n passed ($mode)" | tee -a "$out/summary"
[ "$fail" = 0 ]
