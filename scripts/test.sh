#!/usr/bin/env bash
# Runs every test kvwire has: vet, the race-enabled unit and integration tests
# of the root module (memdx, errmap, vbmap, retry, conn, client, mockcluster,
# kvcli), the OpenTelemetry adapters in kvotel/ and README's OTLP example in
# kvotel/example/, and the reference tests in
# reftest/: gocbcore, the Couchbase Node.js SDK (its C++ core) and
# libcouchbase's cbc tools against the mock cluster.
#
# The Node.js SDK is installed into reftest/node/node_modules by
# scripts/node-sdk.sh (npm ci, at the version package-lock.json pins). When
# KVWIRE_REQUIRE_NODE=1 (CI sets it through .ci/run) an SDK that cannot be
# installed fails the run; otherwise the Node tests skip with a message
# saying how to run them.
#
# The conformance tests read the shared corpus at ../shared/conformance
# (README.md, "The conformance corpus"); without it they skip, and this
# script says how many, loudly, at the end.
# libcouchbase's cbc, cbc-subdoc and cbc-pillowfight are built from the C
# source in the npm registry's couchbase 3.2.7 package by
# scripts/libcouchbase.sh, cached outside the repository (a second run only
# checks the cache). From an empty cache the build takes minutes: it starts
# in the background at the lowest CPU priority while the root module is
# tested, and the reftest step waits for it. When KVWIRE_REQUIRE_LCB=1 (CI
# sets it through .ci/run) tools that cannot be built fail the run;
# otherwise the libcouchbase tests skip with a message saying how to run
# them.
#
# scripts/dns-srv-test.sh checks the DNS SRV bootstrap against dnsmasq
# (Debian's dnsmasq-base, installed when missing) in a network namespace of
# its own; it needs root, and otherwise skips, said again at the end. When
# KVWIRE_REQUIRE_DNS_SRV=1 (CI sets it through .ci/run) a skip fails the run.
#
# memcached (Debian's package) is installed and started on loopback by
# scripts/memcached.sh. When KVWIRE_REQUIRE_MEMCACHED=1 (CI sets it through
# .ci/run) a memcached that cannot be started fails the run; otherwise the
# memcached tests skip with a message saying how to run them.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export GOFLAGS="${GOFLAGS:-} -count=1"

# Stop memcached afterwards only if this run started it: instances someone
# else started (another make test, a developer's shell) are left running.
started=0
already=0
scripts/memcached.sh status && already=1
if env=$(scripts/memcached.sh up); then
  eval "$env"
  [ "$already" = 1 ] || started=1
elif [ "${KVWIRE_REQUIRE_MEMCACHED:-0}" = 1 ]; then
  echo "test.sh: memcached could not be started and KVWIRE_REQUIRE_MEMCACHED=1" >&2
  exit 1
else
  echo "test.sh: memcached could not be started; its tests will skip" >&2
fi
# The conformance tests read the shared corpus next to the repository
# (internal/conformance; README.md, "The conformance corpus"). Without it
# they skip; each skip is a line of $skips, and the summary below says how
# many, loudly, whatever the outcome.
corpus=${KVWIRE_CONFORMANCE_DIR:-../shared/conformance}
skips=$(mktemp "${TMPDIR:-/tmp}/kvwire-conformance-skips.XXXXXX")
export KVWIRE_CONFORMANCE_SKIPS=$skips
if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus" 2>/dev/null)" ]; then
  echo "test.sh: WARNING: the conformance corpus $corpus is missing: the tests that read it will SKIP (see the summary at the end)" >&2
fi
conformance_summary() {
  local n s
  n=$(grep -c '^skip' "$skips" 2>/dev/null || true)
  s=$(grep -c '^seeds' "$skips" 2>/dev/null || true)
  if [ "${n:-0}" -gt 0 ] || [ "${s:-0}" -gt 0 ]; then
    echo "=================================================================="
    echo "== WARNING: ${n:-0} conformance tests SKIPPED (and ${s:-0} fuzz seed sets left out):"
    echo "== the shared conformance corpus $corpus (from $(pwd)) is missing."
    echo "== It holds real cluster configs, error maps, packets and SCRAM vectors from"
    echo "== kv_engine, gocbcore, libcouchbase and other public projects, and lives next to"
    echo "== the repository, not in it (README.md: \"The conformance corpus\")."
    echo "== CI has it and fails without it (.ci/run sets KVWIRE_REQUIRE_CONFORMANCE=1)."
    echo "== Skipped tests and seed sets, by package:"
    cut -f2 "$skips" | sort | uniq -c | sed 's/^/==   /'
    echo "=================================================================="
  fi
}

# The libcouchbase build, in a session of its own so that a run ending
# early can stop the whole build (cmake, make, the compilers) with it.
lcb_dir=$(mktemp -d)
lcb_pid=
if [ -f reftest/go.mod ]; then
  setsid nice -n 19 scripts/libcouchbase.sh >"$lcb_dir/out" 2>"$lcb_dir/log" &
  lcb_pid=$!
fi

# An if, not `[ ] &&`: the trap's last status would become the script's.
cleanup() {
  if [ -n "$lcb_pid" ] && kill -0 "$lcb_pid" 2>/dev/null; then
    kill -TERM -- "-$lcb_pid" 2>/dev/null
    wait "$lcb_pid" 2>/dev/null
  fi
  rm -rf "$lcb_dir"
  conformance_summary
  rm -f "$skips"
  if [ "$started" = 1 ]; then scripts/memcached.sh down; fi
}
trap cleanup EXIT

set -e
echo "== go vet"
$GO vet ./...
echo "== staticcheck"
$GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== go test -race (root module)"
$GO test -race -timeout 8m ./...
echo "== conn's scripted tests again over loopback TCP (where the read role is lent)"
KVWIRE_CONN_TCP=1 $GO test -race -timeout 5m ./conn
# Race builds read and write the usual way; only these runs make a lone
# caller's reads and writes direct system calls (conn/sysio_linux.go).
echo "== conn's tests over loopback TCP and client's, without the race detector (direct system calls)"
KVWIRE_CONN_TCP=1 $GO test -timeout 5m ./conn
$GO test -timeout 5m ./client
echo "== DNS SRV against a real resolver in a network namespace (scripts/dns-srv-test.sh)"
# Needs root (CI runs as root and sets KVWIRE_REQUIRE_DNS_SRV=1, which makes
# a skip a failure); elsewhere it says SKIPPED, and the summary repeats it.
dns_out=$(mktemp)
scripts/dns-srv-test.sh 2>&1 | tee "$dns_out" | grep -v 'dnsmasq\['
dns_skipped=$(grep -m1 '^dns-srv: SKIPPED' "$dns_out" || true)
rm -f "$dns_out"
if [ -f kvotel/go.mod ]; then
  echo "== kvotel (the OpenTelemetry adapters, a nested module)"
  # Like reftest below, a module of its own that ./... does not reach.
  (cd kvotel && $GO vet ./... &&
    $GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... &&
    $GO test -race -timeout 5m ./...)
  # README.md's OpenTelemetry program, run against the mock and an OTLP
  # collector of the test's own: a module of its own for the exporters'
  # dependencies (kvotel/example/doc.go).
  echo "== kvotel/example (README.md's OTLP export)"
  (cd kvotel/example && $GO vet ./... &&
    $GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... &&
    $GO test -race -timeout 5m ./...)
fi
if [ -f reftest/go.mod ]; then
  echo "== Couchbase Node.js SDK for reftest (scripts/node-sdk.sh)"
  if scripts/node-sdk.sh; then
    :
  elif [ "${KVWIRE_REQUIRE_NODE:-0}" = 1 ]; then
    echo "test.sh: the Node.js SDK could not be installed and KVWIRE_REQUIRE_NODE=1" >&2
    exit 1
  else
    echo "test.sh: the Node.js SDK could not be installed; its tests will skip" >&2
  fi
  echo "== libcouchbase's cbc tools for reftest (scripts/libcouchbase.sh)"
  lcb_start=$(date +%s)
  lcb_ok=1
  wait "$lcb_pid" || lcb_ok=0
  lcb_pid=
  if [ "$lcb_ok" = 1 ]; then
    KVWIRE_LCB_BIN=$(cat "$lcb_dir/out")
    export KVWIRE_LCB_BIN
    cat "$lcb_dir/log"
    echo "libcouchbase's tools in $KVWIRE_LCB_BIN (waited $(($(date +%s) - lcb_start)) s for the build here)"
  elif [ "${KVWIRE_REQUIRE_LCB:-0}" = 1 ]; then
    cat "$lcb_dir/log" >&2
    echo "test.sh: libcouchbase's tools could not be built and KVWIRE_REQUIRE_LCB=1" >&2
    exit 1
  else
    cat "$lcb_dir/log" >&2
    echo "test.sh: libcouchbase's tools could not be built; their tests will skip" >&2
  fi
  echo "== reftest (gocbcore, the Node.js SDK and libcouchbase against the mock cluster)"
  # A nested module: ./... above stops at its go.mod, so it is vetted and
  # linted here, with the root module's staticcheck. The timeout leaves
  # room for the Node.js scripts' own limit (nodeRunLimit, 4 min) to
  # report a stuck script before go test's panic would.
  (cd reftest && $GO vet ./... &&
    $GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... &&
    $GO test -race -timeout 10m ./...)
fi
if [ -n "$dns_skipped" ]; then
  echo "== WARNING: the DNS SRV test was SKIPPED: ${dns_skipped#dns-srv: SKIPPED: }"
fi
if grep -q '^skip' "$skips" 2>/dev/null; then
  echo "== all tests passed, but $(grep -c '^skip' "$skips") conformance tests were SKIPPED (see below)"
else
  echo "== all tests passed"
fi
