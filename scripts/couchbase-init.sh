#!/usr/bin/env bash
# Initialises the Couchbase Server of docker-compose.yml (runs in the
# couchbase-init container): a one-node cluster with the data service, the
# bucket, an RBAC user with read/write on it, and a scope and collection for
# the collection tests. Idempotent: a second run finds everything present.
# Commands and flags: couchbase-cli cluster-init, bucket-create, user-manage,
# collection-manage (Couchbase Server 7.6 CLI reference).
set -euo pipefail
CLI=/opt/couchbase/bin/couchbase-cli
C="$CB_HOST:8091"
AUTH=(-u "$CB_ADMIN_USER" -p "$CB_ADMIN_PASSWORD")

if ! $CLI server-list -c "$C" "${AUTH[@]}" >/dev/null 2>&1; then
  $CLI cluster-init -c "$C" \
    --cluster-username "$CB_ADMIN_USER" --cluster-password "$CB_ADMIN_PASSWORD" \
    --cluster-name kvwire --services data --cluster-ramsize 512
fi

if ! $CLI bucket-list -c "$C" "${AUTH[@]}" | grep -qx "$CB_BUCKET"; then
  $CLI bucket-create -c "$C" "${AUTH[@]}" --bucket "$CB_BUCKET" --bucket-type couchbase \
    --bucket-ramsize 256 --bucket-replica 0 --enable-flush 1 --wait
fi

# Community Edition can assign only bucket_full_access, admin and ro_admin
# (Couchbase docs, REST API "Role-Based Access Control"), so the test user gets
# bucket_full_access on the one bucket: enough for every KV operation.
$CLI user-manage -c "$C" "${AUTH[@]}" --set --auth-domain local \
  --rbac-username "$CB_USER" --rbac-password "$CB_PASSWORD" \
  --roles "bucket_full_access[$CB_BUCKET]"

$CLI collection-manage -c "$C" "${AUTH[@]}" --bucket "$CB_BUCKET" --create-scope app 2>/dev/null || true
$CLI collection-manage -c "$C" "${AUTH[@]}" --bucket "$CB_BUCKET" --create-collection app.users 2>/dev/null || true
echo "couchbase-init: cluster, bucket $CB_BUCKET, user $CB_USER and collection app.users ready"
