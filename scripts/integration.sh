#!/usr/bin/env bash
# make integration: start Couchbase Server in Docker (docker-compose.yml),
# wait until the init container has created the cluster, run the integration
# tests against it, and tear everything down (also on failure).
# Needs a Docker engine with the compose plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
if ! docker info >/dev/null 2>&1; then
  echo "integration.sh: no Docker engine answers here (docker info failed); the integration tests need one." >&2
  exit 2
fi
compose() { docker compose -f docker-compose.yml "$@"; }
tmp=$(mktemp -d)
trap 'compose down -v --remove-orphans >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
compose up -d couchbase
# The init container exits 0 once the bucket, user and collection exist.
compose up --exit-code-from couchbase-init couchbase-init

export KVWIRE_CONNSTR="couchbase://127.0.0.1/default"
export KVWIRE_USERNAME=kvwire KVWIRE_PASSWORD=kvwire-password
export KVWIRE_ADMIN_USERNAME=Administrator KVWIRE_ADMIN_PASSWORD=password

# bucket-create --wait returns when the bucket is ready on the cluster
# manager's side; KV may still answer NOT_MY_VBUCKET or TMPFAIL while its
# vbuckets warm up, and the manifest with app.users may not have reached it.
# Wait (up to 60 s) until kvcli, with the test user, gets an answer for a
# key in the default collection and in app.users: exists exits 0 (found) or
# 3 (not found) only when KV answered; 1 means it did not (yet).
$GO build -o "$tmp/kvcli" ./cmd/kvcli
kv_ready() {
  local coll rc
  for coll in _default._default app.users; do
    rc=0
    env -u KVCLI_CACERT KVCLI_CONNSTR="$KVWIRE_CONNSTR" KVCLI_USER="$KVWIRE_USERNAME" \
      KVCLI_PASSWORD="$KVWIRE_PASSWORD" "$tmp/kvcli" exists kvwire-integration-probe \
      --collection "$coll" -t 2s --connect-timeout 2s >/dev/null 2>"$tmp/kv.err" || rc=$?
    if [[ $rc != 0 && $rc != 3 ]]; then
      return 1
    fi
  done
}
wait_s=60
deadline=$((SECONDS + wait_s))
until kv_ready; do
  if ((SECONDS >= deadline)); then
    echo "integration.sh: the KV service did not answer for bucket default (and app.users) within ${wait_s}s; last kvcli error:" >&2
    cat "$tmp/kv.err" >&2
    exit 1
  fi
  sleep 1
done

$GO test -race -count=1 -v ./integration/...
