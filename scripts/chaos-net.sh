#!/usr/bin/env bash
# make chaos-net: kvwire's client against the mock cluster over real sockets,
# through packet loss, duplication and a partition.
#
# The mock cluster runs in one network namespace, the workload in another,
# joined by a veth pair whose two ends have addresses of the documentation
# range 198.51.100.0/24 that exist only inside those namespaces: no default
# route, no forwarding, no NAT, nothing added to the host's namespace, so no
# packet can leave the pair. chaos/netchaos (the Go program) adds and
# removes the iptables rules of each phase itself and prints the figures
# and the checks; see its doc comment and docs/ARCHITECTURE.md.
#
# Needs root, `ip netns` and iptables (installed with apt-get when missing).
# Where namespaces cannot be created it says why and exits 0, unless
# KVWIRE_REQUIRE_CHAOS_NET=1, which makes that a failure. Extra flags for
# the workload go in CHAOS_NET_FLAGS (e.g. CHAOS_NET_FLAGS='-loss 20s').
# Exit status: 0 every check passed (or skipped), 1 a check failed, 3 the
# run could not start, 130 interrupted (Ctrl-C).
#
# Everything it creates is named kvwire-cn-* / kvwcn-*; it is removed on
# exit, after Ctrl-C or a failure too (deleting the namespaces deletes the
# veth pair and their iptables rules with them). A second run while one is
# going refuses to start; leftovers of a run that was killed are removed by
# name before starting.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

SRV_NS=kvwire-cn-srv
CLI_NS=kvwire-cn-cli
SRV_IF=kvwcn-srv
CLI_IF=kvwcn-cli
SRV_ADDR=198.51.100.1
CLI_ADDR=198.51.100.2
LOCK=/tmp/kvwire-chaos-net.lock

skip() {
  if [ "${KVWIRE_REQUIRE_CHAOS_NET:-0}" = 1 ]; then
    echo "chaos-net: FAILED: $* (KVWIRE_REQUIRE_CHAOS_NET=1)" >&2
    exit 1
  fi
  echo "chaos-net: SKIPPED: $*"
  exit 0
}

die() {
  echo "chaos-net: $*" >&2
  exit 3
}

[ "$(uname -s)" = Linux ] || skip "network namespaces need Linux"
[ "$(id -u)" = 0 ] || skip "not root: creating network namespaces needs root (run it as root: sudo make chaos-net)"

# One run at a time, from before anything is installed: two apt-gets at
# once fail on dpkg's lock, which would skip the second run.
exec 9>"$LOCK"
flock -n 9 || die "another chaos-net is running (it holds $LOCK); not starting"

# Install what is missing, from Debian's packages.
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || skip "${missing[*]} missing and no apt-get to install them"
  echo "chaos-net: installing ${missing[*]}"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/tmp/kvwire-chaos-net-apt.log 2>&1; then
    tail -5 /tmp/kvwire-chaos-net-apt.log >&2
    skip "could not install ${missing[*]} (apt-get failed, log in /tmp/kvwire-chaos-net-apt.log)"
  fi
fi
ip netns list >/dev/null 2>&1 || skip "\`ip netns\` does not work here"

tmp=""
srv_pid=""

has_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# remove_ns stops the processes inside the namespace (only this script
# starts any there) and deletes it, which deletes its veth end and its
# iptables rules.
remove_ns() {
  local ns=$1 pids
  has_ns "$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "${pids// /}" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
      [ -z "${pids// /}" ] && break
      sleep 0.5
    done
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -KILL $pids 2>/dev/null
  fi
  ip netns del "$ns" 2>/dev/null || echo "chaos-net: could not delete namespace $ns" >&2
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$srv_pid" ]; then
    kill -TERM "$srv_pid" 2>/dev/null
    wait "$srv_pid" 2>/dev/null
  fi
  remove_ns "$CLI_NS"
  remove_ns "$SRV_NS"
  if has_ns "$CLI_NS" || has_ns "$SRV_NS"; then
    echo "chaos-net: namespaces left behind: $(ip netns list | tr '\n' ' ')" >&2
    [ "$rc" = 0 ] && rc=1
  fi
  [ -n "$tmp" ] && rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ns in "$SRV_NS" "$CLI_NS"; do
  if has_ns "$ns"; then
    echo "chaos-net: removing $ns, left by an earlier run that did not clean up"
    remove_ns "$ns"
  fi
done

start=$(date +%s)
tmp=$(mktemp -d /tmp/kvwire-chaos-net.XXXXXX)
echo "chaos-net: building chaos/netchaos"
$GO build -o "$tmp/netchaos" ./chaos/netchaos || die "build failed"

err=$(ip netns add "$SRV_NS" 2>&1) || skip "cannot create a network namespace: $err"
ip netns add "$CLI_NS" || die "cannot create $CLI_NS"
# The veth pair is created inside the client's namespace with its peer
# placed straight into the server's: neither end ever exists in the host's.
ip -n "$CLI_NS" link add "$CLI_IF" type veth peer name "$SRV_IF" netns "$SRV_NS" || die "cannot create the veth pair"
for side in "$SRV_NS $SRV_IF $SRV_ADDR" "$CLI_NS $CLI_IF $CLI_ADDR"; do
  set -- $side
  ip netns exec "$1" sh -c 'echo 0 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6' ||
    die "cannot set $1's sysctls"
  ip -n "$1" addr add "$3/24" dev "$2" || die "cannot address $2"
  ip -n "$1" link set lo up || die "cannot bring lo up in $1"
  ip -n "$1" link set "$2" up || die "cannot bring $2 up"
  [ -z "$(ip -n "$1" route show default)" ] || die "$1 has a default route"
done
echo "chaos-net: namespaces $SRV_NS ($SRV_ADDR on $SRV_IF) and $CLI_NS ($CLI_ADDR on $CLI_IF), joined by a veth pair"

# The cluster prints one line when it listens; fd 3 (opened read-write, so
# the open does not wait for the writer) stays open until the end so its
# stdout never breaks.
mkfifo "$tmp/ready"
exec 3<>"$tmp/ready"
# fd 9 (the lock) is not passed on: a server left behind by a run that was
# killed would otherwise keep every later run out until its -lifetime ends.
ip netns exec "$SRV_NS" "$tmp/netchaos" serve -host "$SRV_ADDR" -lifetime 15m >&3 2>"$tmp/serve.err" 9>&- &
srv_pid=$!
if ! read -r -t 60 -u 3 info; then
  cat "$tmp/serve.err" >&2
  die "the mock cluster did not start within 60 s"
fi
connstr=$(printf '%s' "$info" | sed -n 's/.*"connstr":"\([^"]*\)".*/\1/p')
[ -n "$connstr" ] || die "unexpected line from the mock cluster: $info"
echo "chaos-net: mock cluster at $connstr"

# shellcheck disable=SC2086
ip netns exec "$CLI_NS" "$tmp/netchaos" run -connstr "$connstr" 9>&- \
  -srv-ns "$SRV_NS" -cli-ns "$CLI_NS" -srv-if "$SRV_IF" -cli-if "$CLI_IF" \
  -srv-addr "$SRV_ADDR" -cli-addr "$CLI_ADDR" ${CHAOS_NET_FLAGS:-}
rc=$?
if [ -s "$tmp/serve.err" ]; then
  echo "chaos-net: the mock cluster said:"
  sed 's/^/  /' "$tmp/serve.err"
fi
echo "chaos-net: took $(( $(date +%s) - start )) s (exit $rc)"
exit "$rc"
