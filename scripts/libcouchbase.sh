#!/usr/bin/env bash
# Builds libcouchbase's command-line tools (cbc, cbc-pillowfight, cbc-subdoc)
# for reftest's libcouchbase suite (reftest/lcb_test.go), from the C source
# that ships inside the npm registry's `couchbase` package (3.2.x carries
# libcouchbase 3.3 in deps/lcb). Nothing is downloaded but that tarball
# (npm pack, checked against the integrity pinned below) and Debian's
# packages (cmake, g++, make, libevent-dev, libssl-dev; apt-get, as root;
# npm must be on PATH already, as the Node.js tests need it too).
#
#   scripts/libcouchbase.sh        build when the cache is empty; print the
#                                  directory holding the binaries
#   scripts/libcouchbase.sh --dir  print that directory if it is built,
#                                  exit 1 otherwise (nothing installed or built)
#
# The build is cached outside the repository, keyed by the package version
# and this script's build recipe (RECIPE), in
#   ${KVWIRE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvwire}/libcouchbase-<key>/
# so a second run only checks a stamp. From an empty cache on a quiet
# 2-core machine the build takes about 2 minutes (108 s measured), plus
# about 15 s for the apt-get install of what is missing. Concurrent runs take a lock: one builds, the others wait for
# it and reuse its result. A build goes to a temporary directory renamed
# into place when complete, so an interrupted build leaves nothing that
# looks finished.
#
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail
export LC_ALL=C

NPM_PACKAGE=couchbase
NPM_VERSION=3.2.7
# dist.integrity of couchbase@3.2.7 as the registry publishes it.
NPM_INTEGRITY=sha512-ByECtfpXVE/h0dXHv/hgZjEyn49WDbW9KbXK++RC69jp2ZedsV24ekwlMxd9V0Yot9pGFLock0AC3p9/vLJGhQ==
# Bump when the build below changes, so that caches built the old way are
# not taken for this one.
RECIPE=2
KEY=npm$NPM_VERSION-r$RECIPE
CACHE=${KVWIRE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvwire}
DIR=$CACHE/libcouchbase-$KEY
BIN=$DIR/bin
STAMP=$DIR/.kvwire-built
TOOLS=(cbc cbc-pillowfight cbc-subdoc)

log() { echo "libcouchbase.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

built() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$KEY" ] || return 1
  local t
  for t in "${TOOLS[@]}"; do
    [ -x "$BIN/$t" ] || return 1
  done
}

if [ "${1:-}" = --dir ]; then
  built || exit 1
  echo "$BIN"
  exit 0
fi
[ $# = 0 ] || die "usage: $0 [--dir]"

if built; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE"
# One build at a time per cache (fd 9 holds the lock until the script
# exits); a run that waited finds the other's build done.
if command -v flock >/dev/null; then
  exec 9>"$CACHE/libcouchbase.lock"
  flock -w 1800 9 || die "another libcouchbase.sh held $CACHE/libcouchbase.lock for 30 min"
  if built; then
    echo "$BIN"
    exit 0
  fi
fi

install_missing() {
  local missing=() p
  # g++ and make build; cmake configures; libevent-dev gives the default I/O
  # plugin (embedded); libssl-dev gives TLS.
  for p in cmake make g++ libevent-dev libssl-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "${missing[*]} missing and there is no apt-get to install them"
  [ "$(id -u)" = 0 ] || die "${missing[*]} missing: install them (apt-get install ${missing[*]}) or run as root"
  log "installing ${missing[*]} with apt-get"
  local out
  out=$(env DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "$@"' _ "${missing[@]}" 2>&1) ||
    die "apt-get install ${missing[*]} failed: $out"
}

start=$(date +%s)
command -v npm >/dev/null || die "npm is not on PATH: install Node.js (with npm) to fetch $NPM_PACKAGE@$NPM_VERSION"
install_missing

WORK=$(mktemp -d "$CACHE/libcouchbase-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# A signal ends the script through exit, so that the EXIT trap removes
# the unfinished build.
trap 'exit 1' INT TERM HUP

log "fetching $NPM_PACKAGE@$NPM_VERSION from the npm registry"
(cd "$WORK" && npm pack --silent "$NPM_PACKAGE@$NPM_VERSION" >/dev/null 2>"$WORK/npm.log") ||
  die "npm pack $NPM_PACKAGE@$NPM_VERSION failed: $(tail -5 "$WORK/npm.log")"
tgz=$WORK/$NPM_PACKAGE-$NPM_VERSION.tgz
[ -f "$tgz" ] || die "npm pack left no $tgz"
got=sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
[ "$got" = "$NPM_INTEGRITY" ] || die "$tgz has integrity $got, want $NPM_INTEGRITY"
tar -xzf "$tgz" -C "$WORK" package/deps/lcb
SRC=$WORK/package/deps/lcb
[ -f "$SRC/CMakeLists.txt" ] || die "$NPM_PACKAGE@$NPM_VERSION has no deps/lcb/CMakeLists.txt"

log "building libcouchbase $(sed -n 's/^project(libcouchbase VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt") (cbc, cbc-pillowfight, cbc-subdoc)"
# The tools and the library only: no tests (they would download a Java
# mock), no git version lookup (the source is not a git checkout), the
# libevent I/O plugin embedded in the library (no dlopen), and
# $ORIGIN-relative run paths, so bin/ and lib/ can be moved into place. A
# build type of our own compiles with -O1 and no debug information (its
# flags come after the -ggdb3 libcouchbase adds to every other type): the
# tools are a referee, not a benchmark, and it compiles faster than the
# Release build's -O3 -ggdb3.
cmake -S "$SRC" -B "$WORK/build" \
  -DCMAKE_BUILD_TYPE=KvwireRef \
  -DCMAKE_C_FLAGS_KVWIREREF="-O1 -g0 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_KVWIREREF="-O1 -g0 -DNDEBUG" \
  -DLCB_NO_TESTS=ON \
  -DLCB_SKIP_GIT_VERSION=ON \
  -DLCB_BUILD_DTRACE=OFF \
  -DLCB_BUILD_LIBEV=OFF -DLCB_BUILD_LIBUV=OFF \
  -DLCB_EMBED_PLUGIN_LIBEVENT=ON \
  -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
  >"$WORK/cmake.log" 2>&1 || die "cmake configure failed: $(tail -20 "$WORK/cmake.log")"
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$WORK/build" -j "$jobs" --target "${TOOLS[@]}" >"$WORK/build.log" 2>&1 ||
  die "build failed: $(tail -30 "$WORK/build.log")"

out=$WORK/out
mkdir -p "$out/bin" "$out/lib"
for t in "${TOOLS[@]}"; do
  cp "$WORK/build/bin/$t" "$out/bin/"
done
cp -P "$WORK/build/lib"/libcouchbase.so* "$out/lib/"
"$out/bin/cbc" version >"$WORK/version.log" 2>&1 ||
  die "the built cbc does not run: $(cat "$WORK/version.log")"
echo "$KEY" >"$out/.kvwire-built"
rm -rf "$DIR"
mv "$out" "$DIR"
log "built in $(($(date +%s) - start)) s into $DIR"
echo "$BIN"
