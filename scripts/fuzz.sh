#!/usr/bin/env bash
# Runs every Fuzz* target in the root module for the given time each
# (default 60s):   scripts/fuzz.sh 10m      (or: make fuzz FUZZTIME=10m)
# Targets run one at a time (the machine has 2 cores). New crashers are written
# by `go test` under <pkg>/testdata/fuzz/<Target>/ and become regression seeds
# that `make test` runs; commit them with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-60s}
GO=${GO:-go}
only=${FUZZ_ONLY:-}   # optional regexp over "pkg.Target"
failed=()
for pkg in $($GO list ./...); do
  for target in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    name="${pkg#github.com/kvwire/kvwire/}.$target"
    if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then continue; fi
    echo "== $name for $T"
    # A short minimize time: with the default (60 s) the fuzzer spends whole
    # runs shrinking inputs grown from the large conformance seeds.
    if ! $GO test -run='^$' -fuzz="^${target}\$" -fuzztime="$T" -fuzzminimizetime=5s "$pkg" 2>&1 | tail -3; then
      failed+=("$name")
    fi
  done
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets ran for $T without a finding"
