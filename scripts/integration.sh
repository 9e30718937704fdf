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
trap 'compose down -v --remove-orphans >/dev/null 2>&1 || true' EXIT
compose up -d couchbase
# The init container exits 0 once the bucket, user and collection exist.
compose up --exit-code-from couchbase-init couchbase-init
# The data service can take a moment after bucket-create --wait to accept KV.
export KVWIRE_CONNSTR="couchbase://127.0.0.1/default"
export KVWIRE_USERNAME=kvwire KVWIRE_PASSWORD=kvwire-password
export KVWIRE_ADMIN_USERNAME=Administrator KVWIRE_ADMIN_PASSWORD=password
$GO test -race -count=1 -v ./integration/...
