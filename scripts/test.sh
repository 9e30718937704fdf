#!/usr/bin/env bash
# Runs every test kvwire has: vet, the race-enabled unit and integration tests
# of the root module (memdx, errmap, vbmap, retry, conn, client, mockcluster,
# kvcli), the OpenTelemetry adapters in kvotel/, and the reference tests in
# reftest/: gocbcore and the Couchbase Node.js SDK (its C++ core) against the
# mock cluster.
#
# The Node.js SDK is installed into reftest/node/node_modules by
# scripts/node-sdk.sh (npm ci, at the version package-lock.json pins). When
# KVWIRE_REQUIRE_NODE=1 (CI sets it through .ci/run) an SDK that cannot be
# installed fails the run; otherwise the Node tests skip with a message
# saying how to run them.
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
# An if, not `[ ] &&`: the trap's last status would become the script's.
cleanup() {
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
if [ -f kvotel/go.mod ]; then
  echo "== kvotel (the OpenTelemetry adapters, a nested module)"
  # Like reftest below, a module of its own that ./... does not reach.
  (cd kvotel && $GO vet ./... &&
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
  echo "== reftest (gocbcore and the Node.js SDK against the mock cluster)"
  # A nested module: ./... above stops at its go.mod, so it is vetted and
  # linted here, with the root module's staticcheck. The timeout leaves
  # room for the Node.js scripts' own limit (nodeRunLimit, 4 min) to
  # report a stuck script before go test's panic would.
  (cd reftest && $GO vet ./... &&
    $GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... &&
    $GO test -race -timeout 10m ./...)
fi
echo "== all tests passed"
