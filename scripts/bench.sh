#!/usr/bin/env bash
# make bench: kvwire against what a user would pick instead, in one run on
# this machine (reftest/cmd/benchcmp says how it measures).
#
#   scripts/bench.sh                 the full matrix (about 15 minutes)
#   BENCH_QUICK=1 scripts/bench.sh   3 short rounds, for development (about 1.5 minutes)
#   BENCH_ARGS='-only memcached/get-32B/.*/kvwire$' scripts/bench.sh
#                                    any benchcmp flags (see go run ./cmd/benchcmp -h in reftest/)
#   BENCH_PROFILE='/get-32B/(1|16|256)/kvwire$' scripts/bench.sh
#                                    CPU profiles of the harness process (the client)
#                                    for the measurements whose id
#                                    (backend/workload/goroutines/client, e.g.
#                                    memcached/get-32B/256/kvwire; the leading / keeps
#                                    batch256-get-32B out) matches:
#                                    only the cells holding them are measured (unless
#                                    BENCH_ARGS has -only), then each profiled one runs
#                                    once more for BENCH_PROFILE_DURATION (default 5s)
#                                    with the profiler on; the files
#                                    (memcached_get-32B_256_kvwire.pprof, ...) go to
#                                    BENCH_PROFILE_DIR (default $TMPDIR/kvwire-bench-profiles)
#                                    and so does the report, unless BENCH_OUT says
#                                    otherwise. With BENCH_QUICK=1 the example takes
#                                    about a minute and a half.
#   BENCH_OUT=path                   where the markdown report goes
#                                    (default reftest/bench-results.md)
#   BENCH_README=1                   also replace README.md's section between
#                                    <!-- bench:start --> and <!-- bench:end -->
#                                    with this run's report
#   BENCH_SIDE_R=N                   also a side run with -R N (default: none;
#                                    never with BENCH_ARGS or BENCH_PROFILE)
#   BENCH_BASE=REV                   an A/B instead of the report: benchcmp built
#                                    from git revision REV and from the working
#                                    tree, run in turn for BENCH_AB_ROUNDS rounds
#                                    (default 12) by reftest/cmd/benchab, which
#                                    prints each measurement in both and the
#                                    medians of the rounds' ratios (to BENCH_OUT
#                                    too when set); e.g.
#                                    BENCH_BASE=main BENCH_ARGS='-only ^mock/get-32B/16/ -duration 1s' scripts/bench.sh
#
# With BENCH_SIDE_R, after the main run a side run measures the batch rows
# again against a memcached of this script's own started with -R N
# (requests served per connection per event-loop turn; memcached's default
# is 20, which splits a batch of 256 binary gets into 13 turns while a text
# multi-get is one request: why kvwire's GetMany reads memcached with text
# multi-gets). Its ratios are context, appended to the report (and README).
#
# Servers run in processes of their own, so that the harness's CPU time is
# its client's: memcached through scripts/memcached.sh (stopped afterwards
# only if this script started it) and the mock cluster through
# reftest/cmd/mockserver (always this script's own, stopped at exit).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
OUT=${BENCH_OUT:-$ROOT/reftest/bench-results.md}
BASE=${BENCH_BASE:-}
if [ -n "$BASE" ]; then
  [ -z "${BENCH_README:-}${BENCH_PROFILE:-}${BENCH_SIDE_R:-}" ] ||
    { echo "bench.sh: ERROR: BENCH_BASE runs an A/B, not with BENCH_README, BENCH_PROFILE or BENCH_SIDE_R" >&2; exit 1; }
  OUT=${BENCH_OUT:-}
fi
PROFILE_DIR=
if [ -n "${BENCH_PROFILE:-}" ]; then
  # A profiling run measures a few cells: its report goes beside the
  # profiles, not over the committed one.
  PROFILE_DIR=${BENCH_PROFILE_DIR:-${TMPDIR:-/tmp}/kvwire-bench-profiles}
  mkdir -p "$PROFILE_DIR"
  PROFILE_DIR=$(cd "$PROFILE_DIR" && pwd)
  OUT=${BENCH_OUT:-$PROFILE_DIR/bench-results.md}
fi

log() { echo "bench.sh: $*" >&2; }

tmp=$(mktemp -d)
started_memcached=0
mock_pid=
side_pid=
cleanup() {
  if [ -n "$side_pid" ]; then
    kill "$side_pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$side_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$side_pid" 2>/dev/null || true
  fi
  exec 3>&- 2>/dev/null || true # the mock server's stdin: EOF stops it
  if [ -n "$mock_pid" ]; then
    kill "$mock_pid" 2>/dev/null || true
    wait "$mock_pid" 2>/dev/null || true
  fi
  if [ "$started_memcached" = 1 ]; then
    scripts/memcached.sh down || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building the harness and the mock server"
(cd reftest && "$GO" build -o "$tmp/benchcmp" ./cmd/benchcmp && "$GO" build -o "$tmp/mockserver" ./cmd/mockserver)
if [ -n "$BASE" ]; then
  rev=$(git rev-parse --verify --quiet "$BASE^{commit}") || { log "ERROR: BENCH_BASE=$BASE is not a git revision here"; exit 1; }
  log "building benchcmp at $BASE ($(git rev-parse --short "$rev")) and reftest/cmd/benchab"
  mkdir "$tmp/base"
  git archive "$rev" | tar -x -C "$tmp/base"
  (cd "$tmp/base/reftest" && "$GO" build -o "$tmp/benchcmp-base" ./cmd/benchcmp)
  (cd reftest && "$GO" build -o "$tmp/benchab" ./cmd/benchab)
fi

if ! scripts/memcached.sh status 2>/dev/null; then
  started_memcached=1
fi
eval "$(scripts/memcached.sh up)"
state=${KVWIRE_MEMCACHED_STATE:-${TMPDIR:-/tmp}/kvwire-memcached-$(id -u)}
memcached_pid=$(cat "$state/plain.pid" 2>/dev/null || echo 0)

# The mock cluster reads its stdin from a FIFO this script holds open: if
# the script dies, even by SIGKILL, the mock sees end of file and exits.
mkfifo "$tmp/mock.in"
"$tmp/mockserver" -stdin <"$tmp/mock.in" >"$tmp/mock.out" 2>"$tmp/mock.err" &
mock_pid=$!
exec 3>"$tmp/mock.in"
for ((i = 0; i < 300; i++)); do
  [ -s "$tmp/mock.out" ] && break
  kill -0 "$mock_pid" 2>/dev/null || { cat "$tmp/mock.err" >&2; log "ERROR: the mock server exited"; exit 1; }
  sleep 0.1
done
mock=$(head -1 "$tmp/mock.out")
[ -n "$mock" ] || { log "ERROR: the mock server printed no connection string"; exit 1; }
log "memcached at $KV_MEMCACHED_ADDR (pid $memcached_pid), mock cluster at $mock (pid $mock_pid)"

if [ -n "$BASE" ]; then
  # shellcheck disable=SC2206 # flags are split on spaces on purpose
  ab_args=(${BENCH_ARGS:-})
  "$tmp/benchab" -base "$tmp/benchcmp-base" -new "$tmp/benchcmp" -rounds "${BENCH_AB_ROUNDS:-12}" -- \
    -memcached "$KV_MEMCACHED_ADDR" -memcached-pid "$memcached_pid" -mock "$mock" -mock-pid "$mock_pid" \
    "${ab_args[@]}" | tee "$tmp/ab.txt"
  if [ -n "$OUT" ]; then
    { echo "BENCH_BASE=$BASE ($(git rev-parse --short "$rev")) against the working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- client conn memdx vbmap retry errmap internal 2>/dev/null || echo '+uncommitted')), BENCH_ARGS='${BENCH_ARGS:-}', $(date -u '+%Y-%m-%d %H:%M UTC')"
      echo
      cat "$tmp/ab.txt"; } >"$OUT"
    log "A/B written to $OUT"
  fi
  exit 0
fi

cmd="make bench"
args=()
if [ -n "${BENCH_QUICK:-}" ]; then
  cmd="BENCH_QUICK=1 make bench"
  args+=(-quick)
fi
if [ -n "${BENCH_README:-}" ]; then
  cmd="BENCH_README=1 $cmd"
fi
if [ -n "${BENCH_ARGS:-}" ]; then
  cmd="BENCH_ARGS='$BENCH_ARGS' $cmd"
  # shellcheck disable=SC2206 # flags are split on spaces on purpose
  args+=($BENCH_ARGS)
fi
if [ -n "$PROFILE_DIR" ]; then
  cmd="BENCH_PROFILE='$BENCH_PROFILE' $cmd"
  args+=(-profile "$BENCH_PROFILE" -profile-dir "$PROFILE_DIR" -profile-duration "${BENCH_PROFILE_DURATION:-5s}")
fi
note="Servers: $(memcached -V 2>/dev/null || echo memcached) (Debian package, scripts/memcached.sh: -t 2 -c 1024 -m 64) on $KV_MEMCACHED_ADDR; mockcluster (3 nodes, bucket default) in its own process; clients: kvwire $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- client conn memdx vbmap retry errmap internal 2>/dev/null || echo '+uncommitted'), gomemcache $(cd reftest && "$GO" list -m -f '{{.Version}}' github.com/bradfitz/gomemcache), gocbcore $(cd reftest && "$GO" list -m -f '{{.Version}}' github.com/couchbase/gocbcore/v10)"

if [ -n "${BENCH_README:-}" ]; then
  [ -z "$PROFILE_DIR" ] || { log "ERROR: BENCH_README with BENCH_PROFILE: a profiling run measures a few cells, not the README's report"; exit 1; }
  grep -q '^<!-- bench:start -->$' README.md && grep -q '^<!-- bench:end -->$' README.md ||
    { log "ERROR: README.md has no <!-- bench:start --> / <!-- bench:end --> markers"; exit 1; }
  args+=(-readme "$tmp/readme.md")
fi
"$tmp/benchcmp" -memcached "$KV_MEMCACHED_ADDR" -memcached-pid "$memcached_pid" \
  -mock "$mock" -mock-pid "$mock_pid" -out "$OUT" -command "$cmd" -note "$note" "${args[@]}"
side_r=${BENCH_SIDE_R:-}
if [ -n "$side_r" ] && [ -z "${BENCH_ARGS:-}" ] && [ -z "$PROFILE_DIR" ]; then
  side_port=${BENCH_SIDE_PORT:-21219}
  chmod 711 "$tmp" # memcached writes its pid file as the user it runs as
  mkdir -m 1777 "$tmp/side"
  as=()
  if [ "$(id -u)" = 0 ]; then
    as=(-u "$(id -un memcache 2>/dev/null || echo nobody)")
  fi
  memcached -d "${as[@]}" -l 127.0.0.1 -p "$side_port" -U 0 -m 64 -c 1024 -t 2 -R "$side_r" \
    -P "$tmp/side/pid" >"$tmp/side/log" 2>&1 || { log "ERROR: the side run's memcached did not start"; exit 1; }
  for ((i = 0; i < 100; i++)); do
    [ -s "$tmp/side/pid" ] && (exec 9<>"/dev/tcp/127.0.0.1/$side_port") 2>/dev/null && break
    sleep 0.1
  done
  side_pid=$(cat "$tmp/side/pid" 2>/dev/null || pgrep -f "memcached -d .*-p $side_port " || true)
  [ -n "$side_pid" ] || { log "ERROR: the side run's memcached is not running: $(cat "$tmp/side/log")"; exit 1; }
  log "side run: memcached -R $side_r at 127.0.0.1:$side_port (pid $side_pid)"
  side_args=(-only '^memcached/batch' -label "memcached -R $side_r (side run, context)")
  if [ -n "${BENCH_README:-}" ]; then
    side_args+=(-readme "$tmp/side-readme.md")
  fi
  side_note="Side run after the main one: the batch rows against memcached $(memcached -V 2>/dev/null | cut -d' ' -f2) started by scripts/bench.sh with -t 2 -c 1024 -m 64 -R $side_r on 127.0.0.1:$side_port, the main run's clients and keys; targets do not apply to it"
  "$tmp/benchcmp" -memcached "127.0.0.1:$side_port" -memcached-pid "$side_pid" -out "$tmp/side.md" \
    -command "$cmd" -note "$side_note" "${args[@]}" "${side_args[@]}" >&2
  { printf '\n# Side run: memcached -R %s\n\n' "$side_r"; sed 's/^#/##/' "$tmp/side.md"; } >>"$OUT"
  if [ -n "${BENCH_README:-}" ]; then
    { printf '\n#### Side run: memcached with -R %s (context)\n\n' "$side_r"; cat "$tmp/side-readme.md"; } >>"$tmp/readme.md"
  fi
fi
log "report written to ${OUT#"$ROOT"/}"
if [ -n "$PROFILE_DIR" ]; then
  log "CPU profiles in $PROFILE_DIR (go tool pprof -top FILE; the report lists them)"
fi
if [ -n "${BENCH_README:-}" ]; then
  awk -v f="$tmp/readme.md" '
    /^<!-- bench:start -->$/ { print; print ""; while ((getline line < f) > 0) print line; print ""; skip = 1; next }
    /^<!-- bench:end -->$/ { skip = 0 }
    !skip { print }' README.md >"$tmp/README.md"
  cat "$tmp/README.md" >README.md
  log "README.md's bench section replaced with this run's report"
fi
