#!/usr/bin/env bash
# kvwire's DNS SRV bootstrap (SDK RFC 0011) against a real resolver: in a
# network namespace of its own, a mock cluster (kvcli serve) listens on the
# namespace's loopback with its KV ports at 11210, 11211 and 11212, and
# dnsmasq (Debian's dnsmasq-base, installed with apt-get when missing)
# answers on the namespace's 127.0.0.1:53 for the zone "test" only:
#
#   _couchbase._tcp.cluster.test  SRV  node1.cluster.test:11211, node2.cluster.test:11212
#   _couchbase._tcp.prio.test     SRV  priority 0: node3.cluster.test:11299 (nothing listens there),
#                                      priority 10: node2.cluster.test:11212
#   _couchbase._tcp.down.test     SRV  target "." (RFC 2782: the service is not available)
#   node1/node2/node3.cluster.test A   127.0.0.1     (cluster.test itself has no A record)
#   plain.test                    A    127.0.0.1     (no SRV record)
#   anything else under .test     NXDOMAIN
#
# `ip netns exec` gives every command run in the namespace the namespace's
# own /etc/resolv.conf (/etc/netns/NS/resolv.conf: nameserver 127.0.0.1),
# so kvcli uses the system resolver, as a user's program would. Checks:
#
#   1. kvcli -c couchbase://cluster.test/default set, then get: the seeds
#      come from the SRV record (the name has no address of its own);
#   2. the same with enable_dns_srv=false fails, naming cluster.test;
#   3. couchbase://plain.test/default (no SRV record) falls back to the
#      name's A record and the default port 11210: set and get work;
#   4. couchbase://nosuch.test/default fails within its connect timeout
#      (3 s) with an error naming the name and the record looked up;
#   5. couchbase://silent.test/default, whose lookups dnsmasq forwards to a
#      server that never answers (its queries dropped by iptables inside
#      the namespace; the resolver waits 5 s a try, twice), fails within
#      its connect timeout, naming the name: the lookups are bounded by
#      the client's timeout, not the resolver's;
#   6. couchbase://prio.test/default, whose record mixes ports and
#      priorities, the first target (by priority) dead: set and get work
#      through the other;
#   7. couchbase://down.test/default, whose record's only target is ".",
#      fails, its error saying the service is not available there.
#
# The namespace has only its loopback: no packet leaves it, and dnsmasq
# forwards nothing (--no-resolv, no upstream server).
#
# Needs Linux and root; otherwise it says why and exits 0, unless
# KVWIRE_REQUIRE_DNS_SRV=1 (CI), which makes that a failure. Exit status:
# 0 every check passed (or skipped), 1 a check failed, 3 the run could not
# start. Everything it creates (namespace kvwire-srv-PID, /etc/netns entry,
# processes in the namespace, temporary files) is removed on exit.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
NS=kvwire-srv-$$
CONNECT_TIMEOUT_MS=3000

skip() {
  if [ "${KVWIRE_REQUIRE_DNS_SRV:-0}" = 1 ]; then
    echo "dns-srv: FAILED: $* (KVWIRE_REQUIRE_DNS_SRV=1)" >&2
    exit 1
  fi
  echo "dns-srv: SKIPPED: $*"
  exit 0
}
die() {
  echo "dns-srv: $*" >&2
  exit 3
}

[ "$(uname -s)" = Linux ] || skip "network namespaces need Linux"
[ "$(id -u)" = 0 ] || skip "not root: creating a network namespace needs root (run it as root: sudo scripts/dns-srv-test.sh)"
command -v ip >/dev/null 2>&1 || skip "no ip(8) (Debian's iproute2)"
missing=()
command -v dnsmasq >/dev/null 2>&1 || missing+=(dnsmasq-base)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
if [ "${#missing[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || skip "${missing[*]} missing and no apt-get to install them"
  echo "dns-srv: installing ${missing[*]}"
  # One apt-get at a time on this machine: dpkg's lock would fail a second.
  if ! flock /tmp/kvwire-apt.lock sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${missing[*]} ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${missing[*]}; }" >/tmp/kvwire-dns-srv-apt.log 2>&1; then
    tail -5 /tmp/kvwire-dns-srv-apt.log >&2
    skip "could not install ${missing[*]} (apt-get failed, log in /tmp/kvwire-dns-srv-apt.log)"
  fi
fi
ip netns list >/dev/null 2>&1 || skip "\`ip netns\` does not work here"

tmp=""
cleanup() {
  local rc=$? pids
  trap - EXIT INT TERM
  if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$NS"; then
    pids=$(ip netns pids "$NS" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -TERM $pids 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$NS" 2>/dev/null | tr '\n' ' ')
      [ -z "${pids// /}" ] && break
      sleep 0.2
    done
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$NS" 2>/dev/null || echo "dns-srv: could not delete namespace $NS" >&2
  fi
  rm -rf "/etc/netns/$NS"
  [ -n "$tmp" ] && rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$(date +%s)
tmp=$(mktemp -d /tmp/kvwire-dns-srv.XXXXXX)
$GO build -o "$tmp/kvcli" ./cmd/kvcli || die "building kvcli failed"

err=$(ip netns add "$NS" 2>&1) || skip "cannot create a network namespace: $err"
ip -n "$NS" link set lo up || die "cannot bring lo up in $NS"
mkdir -p "/etc/netns/$NS" || die "cannot create /etc/netns/$NS"
printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:2\n' >"/etc/netns/$NS/resolv.conf"
# An empty hosts file: every name comes from the namespace's DNS server.
printf '127.0.0.1 localhost\n' >"/etc/netns/$NS/hosts"

in_ns() { ip netns exec "$NS" "$@"; }

# The mock cluster: one JSON line when it listens (fd 3 stays open, so its
# stdout never breaks).
mkfifo "$tmp/ready"
exec 3<>"$tmp/ready"
in_ns "$tmp/kvcli" serve --json --nodes 3 --vbuckets 64 --kv-port 11210 >&3 2>"$tmp/serve.err" &
if ! read -r -t 60 -u 3 info; then
  cat "$tmp/serve.err" >&2
  die "the mock cluster did not start within 60 s"
fi
user=$(printf '%s' "$info" | sed -n 's/.*"user":"\([^"]*\)".*/\1/p')
password=$(printf '%s' "$info" | sed -n 's/.*"password":"\([^"]*\)".*/\1/p')
case "$info" in
*'"nodes":["127.0.0.1:11210","127.0.0.1:11211","127.0.0.1:11212"]'*) ;;
*) die "the mock cluster is not on 11210-11212: $info" ;;
esac

in_ns dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
  --listen-address=127.0.0.1 --bind-interfaces --port=53 --user=root --pid-file= \
  --local=/test/ \
  --srv-host=_couchbase._tcp.cluster.test,node1.cluster.test,11211,0,0 \
  --srv-host=_couchbase._tcp.cluster.test,node2.cluster.test,11212,0,0 \
  --srv-host=_couchbase._tcp.prio.test,node3.cluster.test,11299,0,0 \
  --srv-host=_couchbase._tcp.prio.test,node2.cluster.test,11212,10,0 \
  --srv-host=_couchbase._tcp.down.test \
  --host-record=node1.cluster.test,127.0.0.1 \
  --host-record=node2.cluster.test,127.0.0.1 \
  --host-record=node3.cluster.test,127.0.0.1 \
  --host-record=plain.test,127.0.0.1 \
  --server=/silent.test/127.0.0.1#5353 \
  --log-queries --log-facility="$tmp/dnsmasq.log" 2>"$tmp/dnsmasq.err" &
# dnsmasq is up once it answers: a lookup of the A record it serves
# (gethostbyname: getaddrinfo's AI_ADDRCONFIG asks nothing in a namespace
# whose only IPv4 address is the loopback's).
up=0
for _ in $(seq 1 100); do
  if in_ns getent hosts plain.test >/dev/null 2>&1; then
    up=1
    break
  fi
  sleep 0.05
done
[ "$up" = 1 ] || { cat "$tmp/dnsmasq.err" >&2; die "dnsmasq did not answer in $NS"; }
# silent.test's server: its queries are dropped (no ICMP unreachable).
in_ns iptables -A INPUT -p udp --dport 5353 -j DROP || die "iptables in $NS failed"
echo "dns-srv: namespace $NS: mock cluster on 127.0.0.1:11210-11212, dnsmasq on 127.0.0.1:53"

failed=0
check() { echo "dns-srv: $1"; }
kv() { # connstr, args...: runs kvcli in the namespace; output in $tmp/out, $tmp/err
  local cs=$1
  shift
  in_ns env KVCLI_CONNSTR="$cs" KVCLI_USER="$user" KVCLI_PASSWORD="$password" "$tmp/kvcli" "$@" >"$tmp/out" 2>"$tmp/err"
}
fail() {
  echo "dns-srv: FAIL: $*" >&2
  sed 's/^/  stderr: /' "$tmp/err" >&2
  failed=1
}

# set_get NAME KEY VALUE: kvcli set then get through couchbase://NAME/default
# works, and dnsmasq was asked for NAME's SRV record.
set_get() {
  local name=$1 key=$2 value=$3
  if kv "couchbase://$name/default" set "$key" "$value" && kv "couchbase://$name/default" get "$key"; then
    [ "$(cat "$tmp/out")" = "$value" ] || fail "get $key through $name printed $(cat "$tmp/out")"
  else
    fail "set/get through $name"
  fi
  grep -q "query\[SRV\] _couchbase._tcp.$name" "$tmp/dnsmasq.log" || fail "dnsmasq saw no SRV query for _couchbase._tcp.$name"
}
# fails_in_time NAME NOTE: a get through couchbase://NAME/default fails
# within CONNECT_TIMEOUT_MS, its error naming NAME. The client's bound is the
# connect timeout; kvcli's own start and exit come on top of it in this
# whole-process figure, hence 5 s of slack: what this catches is a hang, or
# a timeout other than the one given (the default is 10 s), not a slow
# machine.
fails_in_time() {
  local name=$1 note=$2 t0 ms
  t0=$(date +%s%N)
  if kv "couchbase://$name/default?connect_timeout=${CONNECT_TIMEOUT_MS}ms" get srv-key; then
    fail "connected to $name"
    return
  fi
  ms=$((($(date +%s%N) - t0) / 1000000))
  echo "dns-srv:    failed after $ms ms ($note): $(head -c 400 "$tmp/err")"
  grep -q "$name" "$tmp/err" || fail "the error does not name $name"
  [ "$ms" -lt $((CONNECT_TIMEOUT_MS + 5000)) ] || fail "took $ms ms, past the ${CONNECT_TIMEOUT_MS} ms connect timeout"
}

check "1. couchbase://cluster.test/default: seeds from _couchbase._tcp.cluster.test"
set_get cluster.test srv-key via-srv

check "2. couchbase://cluster.test/default?enable_dns_srv=false: no SRV lookup, and cluster.test has no address"
if kv "couchbase://cluster.test/default?enable_dns_srv=false&connect_timeout=${CONNECT_TIMEOUT_MS}ms" get srv-key; then
  fail "connected without the SRV record"
elif ! grep -q 'cluster.test' "$tmp/err"; then
  fail "the error does not name cluster.test"
fi

check "3. couchbase://plain.test/default: no SRV record, so its A record and port 11210"
set_get plain.test a-key via-a

check "4. couchbase://nosuch.test/default: fails within connect_timeout (${CONNECT_TIMEOUT_MS} ms), naming the name and the record"
fails_in_time nosuch.test "kvcli's whole run"
grep -q '_couchbase._tcp.nosuch.test' "$tmp/err" || fail "the error does not name the record _couchbase._tcp.nosuch.test"

check "5. couchbase://silent.test/default: a DNS server that never answers; fails within connect_timeout (${CONNECT_TIMEOUT_MS} ms)"
fails_in_time silent.test "kvcli's whole run; the resolver alone would wait 10 s a lookup"
grep -q 'query\[SRV\] _couchbase._tcp.silent.test' "$tmp/dnsmasq.log" || fail "dnsmasq saw no SRV query for _couchbase._tcp.silent.test"

check "6. couchbase://prio.test/default: priorities and ports mixed, the first target dead"
set_get prio.test prio-key via-prio

check "7. couchbase://down.test/default: the record's only target is \".\" (service not available)"
fails_in_time down.test "kvcli's whole run"
grep -q 'says the service is not available' "$tmp/err" || fail "the error does not say the service is not available"

echo "dns-srv: took $(($(date +%s) - start)) s"
if [ "$failed" = 1 ]; then
  echo "dns-srv: dnsmasq's log:" >&2
  sed 's/^/  /' "$tmp/dnsmasq.log" >&2
  exit 1
fi
echo "dns-srv: all checks passed"
