#!/usr/bin/env bash
# Installs the Couchbase Node.js SDK that reftest's Node tests drive, at the
# version pinned in reftest/node/package-lock.json, with `npm ci` from the
# npm registry. The SDK ships its C++ core prebuilt in a platform package
# (@couchbase/couchbase-<os>-<arch>-napi); install scripts are not run, so
# nothing is compiled.
#
# A second run with the same lock file does nothing (a stamp in
# node_modules records the lock file it installed). Exits non-zero, saying
# why, when node or npm is missing or too old or the install fails;
# scripts/test.sh then fails under KVWIRE_REQUIRE_NODE=1 and otherwise lets
# the Node tests skip.
set -euo pipefail
cd "$(dirname "$0")/../reftest/node"

log() { echo "node-sdk.sh: $*" >&2; }

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool is not on PATH: install Node.js 18 or later (with npm)"
    exit 1
  fi
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; then
  log "Node.js $(node --version) is too old: the tests need 18 or later"
  exit 1
fi

stamp=node_modules/.kvwire-lock
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f node_modules/couchbase/package.json ]; then
  exit 0
fi
log "installing the Couchbase Node.js SDK (npm ci)"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2
# The native core must load on this platform.
node -e 'require("couchbase")' || { log "the installed SDK does not load on this platform"; exit 1; }
echo "$want" > "$stamp"
