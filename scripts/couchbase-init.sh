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

# Captured first: a failing bucket-list ends the script (set -e) instead of
# reading as "no such bucket", and grep -q cannot cut the pipe short.
buckets=$($CLI bucket-list -c "$C" "${AUTH[@]}")
if ! grep -qx "$CB_BUCKET" <<<"$buckets"; then
  $CLI bucket-create -c "$C" "${AUTH[@]}" --bucket "$CB_BUCKET" --bucket-type couchbase \
    --bucket-ramsize 256 --bucket-replica 0 --enable-flush 1 --wait
fi

# Community Edition can assign only bucket_full_access, admin and ro_admin
# (Couchbase docs, REST API "Role-Based Access Control"), so the test user gets
# bucket_full_access on the one bucket: enough for every KV operation.
$CLI user-manage -c "$C" "${AUTH[@]}" --set --auth-domain local \
  --rbac-username "$CB_USER" --rbac-password "$CB_PASSWORD" \
  --roles "bucket_full_access[$CB_BUCKET]"

# The scope and collection are created only when the listing does not show
# them; any failure (listing or creating) ends the script with the CLI's own
# message (it prints "ERROR: ..." on stdout). --list-scopes and
# --list-collections SCOPE print one name a line (7.x); the match also
# accepts an indented "- name" in case a release formats the list.
collection_manage() {
  $CLI collection-manage -c "$C" "${AUTH[@]}" --bucket "$CB_BUCKET" "$@"
}
# run_cm ARGS...: collection-manage, its output on stdout; on failure the
# output goes to stderr and the status is 1.
run_cm() {
  local out
  if ! out=$(collection_manage "$@" 2>&1); then
    echo "couchbase-init: collection-manage $* failed:" >&2
    printf '%s\n' "$out" >&2
    return 1
  fi
  printf '%s\n' "$out"
}
listed() { # listed NAME: stdin (a listing) has NAME on a line of its own
  grep -qxE "[[:space:]]*(- )?$1[[:space:]]*"
}
# create ARGS...: create what the listing did not show. "already exists"
# (the listing was read wrong) is the one failure accepted.
create() {
  local out
  if out=$(collection_manage "$@" 2>&1); then
    return 0
  fi
  if grep -qi 'already exists' <<<"$out"; then
    echo "couchbase-init: collection-manage $*: already exists"
    return 0
  fi
  echo "couchbase-init: collection-manage $* failed:" >&2
  printf '%s\n' "$out" >&2
  return 1
}

scopes=$(run_cm --list-scopes)
if ! listed app <<<"$scopes"; then
  create --create-scope app || exit 1
fi
collections=$(run_cm --list-collections app)
if ! listed users <<<"$collections"; then
  create --create-collection app.users || exit 1
fi
echo "couchbase-init: cluster, bucket $CB_BUCKET, user $CB_USER and collection app.users ready"
