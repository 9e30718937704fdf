#!/usr/bin/env bash
# Loopback memcached instances for kvwire's tests and benchmarks.
#
#   scripts/memcached.sh up     install memcached and openssl (apt-get) if missing,
#                               start the three instances, wait until they answer,
#                               print exports
#   scripts/memcached.sh down   release the caller's hold; stop the instances this
#                               script started once no other caller holds them
#   scripts/memcached.sh status exit 0 when the three instances this script starts
#                               are running (whoever ran `up`)
#
#   plain : no auth, binary + ascii        127.0.0.1:$KVWIRE_MEMCACHED_PORT      (21211)
#   sasl  : binary only, SASL PLAIN        127.0.0.1:$KVWIRE_MEMCACHED_SASL_PORT (21212)
#   tls   : TLS (-Z), binary only, SASL    127.0.0.1:$KVWIRE_MEMCACHED_TLS_PORT  (21213)
#           with a certificate for 127.0.0.1 and localhost, signed by a CA made
#           by this script when it starts the instance ($STATE/tls/ca.pem)
#
# `up` is idempotent: an instance already started with the same settings is
# reused. Runs may share the instances (several `make test` on one machine):
# `up` and `down` take a lock ($STATE.lock), so two never start or stop them
# at once, and `up` records its caller (the shell that ran it, $PPID) as a
# holder; `down` releases its caller's hold and stops the instances only when
# no other holder is still running, so one run never stops them under
# another. Progress goes to stderr; stdout carries only the exports, so
#   eval "$(scripts/memcached.sh up)"
# sets KV_MEMCACHED_ADDR, KV_MEMCACHED_SASL_ADDR, KV_MEMCACHED_TLS_ADDR,
# KV_MEMCACHED_TLS_CA (the CA's PEM file), KV_MEMCACHED_USER and
# KV_MEMCACHED_PASS, which the tests read.
set -euo pipefail
export LC_ALL=C

PORT=${KVWIRE_MEMCACHED_PORT:-21211}
SASL_PORT=${KVWIRE_MEMCACHED_SASL_PORT:-21212}
TLS_PORT=${KVWIRE_MEMCACHED_TLS_PORT:-21213}
USER_=${KVWIRE_MEMCACHED_USER:-kvuser}
PASS=${KVWIRE_MEMCACHED_PASS:-kvpass}
STATE=${KVWIRE_MEMCACHED_STATE:-${TMPDIR:-/tmp}/kvwire-memcached-$(id -u)}
WAIT=${KVWIRE_MEMCACHED_WAIT:-10}

HOLDERS=$STATE/holders

log() { echo "memcached.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# lock serialises up and down between concurrent callers (fd 8 stays open,
# and the lock held, until the script exits).
lock() {
  if ! command -v flock >/dev/null; then
    log "flock not found: concurrent up/down are not serialised"
    return 0
  fi
  exec 8>"$STATE.lock"
  flock -w 600 8 || die "another memcached.sh held $STATE.lock for 600 s"
  # The daemons must not inherit fd 8: they would hold the lock for good
  # (start_one closes it for them).
}

# starttime PID: the process's start time (field 22 of /proc/PID/stat, read
# after the command name, which may hold spaces), empty when it is gone.
starttime() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# hold PID records PID as a holder of the instances.
hold() {
  mkdir -p "$HOLDERS"
  starttime "$1" >"$HOLDERS/$1"
}

# live_holders prints the holders still running and forgets the others (a
# pid reused by another process does not count: its start time differs).
live_holders() {
  local f pid st
  for f in "$HOLDERS"/*; do
    [ -e "$f" ] || continue
    pid=${f##*/}
    st=$(starttime "$pid")
    if [ -n "$st" ] && [ "$st" = "$(cat "$f" 2>/dev/null)" ]; then
      echo "$pid"
    else
      rm -f "$f"
    fi
  done
}

install_missing() {
  local missing=() p
  for p in memcached sasl2-bin libsasl2-modules openssl; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "memcached is missing and there is no apt-get to install ${missing[*]}"
  log "installing ${missing[*]} with apt-get"
  local sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  local out
  out=$($sudo env DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends "$@"' _ "${missing[@]}" 2>&1) ||
    die "apt-get install ${missing[*]} failed: $out"
  # The Debian package starts a system instance on 11211; we never use or stop it.
}

# memcached refuses to run as root without -u; the run user must own $STATE
# because memcached writes its pid file after dropping privileges.
run_as() {
  [ "$(id -u)" = 0 ] || return 0
  if id memcache >/dev/null 2>&1; then echo memcache; else echo nobody; fi
}

port_open() { timeout 1 bash -c ": <>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# alive NAME: the pid file names a live process whose command line is ours.
alive() {
  local pid
  pid=$(cat "$STATE/$1.pid" 2>/dev/null) || return 1
  grep -qaF -- "$STATE/$1.pid" "/proc/$pid/cmdline" 2>/dev/null
}

stop_one() {
  local name=$1 pidf="$STATE/$1.pid" pid i
  pid=$(cat "$pidf" 2>/dev/null) || { rm -f "$STATE/$name.cmd"; return 0; }
  if alive "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do alive "$name" || break; sleep 0.1; done
    ! alive "$name" || kill -KILL "$pid" 2>/dev/null || true
    log "stopped $name (pid $pid)"
  fi
  rm -f "$pidf" "$STATE/$name.cmd"
}

# Cyrus SASL config read by memcached (service "memcached") from SASL_CONF_PATH.
# The realm must equal gethostname(), which memcached passes as the user realm.
make_sasldb() {
  mkdir -p "$STATE/sasl"
  rm -f "$STATE/sasl/sasldb2"
  printf '%s' "$PASS" | saslpasswd2 -p -c -a memcached -u "$(uname -n)" -f "$STATE/sasl/sasldb2" "$USER_" ||
    die "saslpasswd2 failed"
  printf 'mech_list: plain\nsasldb_path: %s\n' "$STATE/sasl/sasldb2" >"$STATE/sasl/memcached.conf"
}

# A CA and a server certificate for 127.0.0.1 and localhost, signed by it,
# made afresh each time the TLS instance starts. Tests trust $STATE/tls/ca.pem.
make_cert() {
  local d="$STATE/tls" out
  mkdir -p "$d"
  rm -f "$d"/*
  out=$( (openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=kvwire-test-ca -keyout "$d/ca.key" -out "$d/ca.pem" &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj /CN=127.0.0.1 -keyout "$d/server.key" -out "$d/server.csr" &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/ext.cnf" &&
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
      -days 30 -extfile "$d/ext.cnf" -out "$d/server.pem") 2>&1) || die "openssl could not make the test certificates: $out"
}

# start NAME PORT FINGERPRINT ARGS...
start_one() {
  local name=$1 port=$2 fp=$3 user i
  shift 3
  if alive "$name" && [ "$(cat "$STATE/$name.cmd" 2>/dev/null)" = "$fp" ]; then
    log "$name already running on 127.0.0.1:$port"
    return 0
  fi
  stop_one "$name"
  mkdir -p "$STATE"
  port_open "$port" && die "port $port is in use by a process this script did not start (set KVWIRE_MEMCACHED_PORT / KVWIRE_MEMCACHED_SASL_PORT / KVWIRE_MEMCACHED_TLS_PORT)"
  case $name in
  sasl) make_sasldb ;;
  tls) { [ -s "$STATE/sasl/sasldb2" ] || make_sasldb; } && make_cert ;;
  esac
  user=$(run_as)
  local as=()
  if [ -n "$user" ]; then
    chown -R "$user" "$STATE"
    as=(-u "$user")
  fi
  SASL_CONF_PATH="$STATE/sasl" memcached -d -v "${as[@]}" -l 127.0.0.1 -p "$port" -U 0 \
    -m 64 -P "$STATE/$name.pid" "$@" >>"$STATE/$name.log" 2>&1 8>&- || die "memcached $name failed to start"
  echo "$fp" >"$STATE/$name.cmd"
  for ((i = 0; i < WAIT * 10; i++)); do
    if alive "$name" && port_open "$port"; then
      log "$name up on 127.0.0.1:$port (pid $(cat "$STATE/$name.pid"))"
      return 0
    fi
    sleep 0.1
  done
  die "$name did not accept connections on 127.0.0.1:$port within ${WAIT}s: $(tail -5 "$STATE/$name.log" 2>/dev/null)"
}

# tls_ok: a TLS handshake with the TLS instance verifies its certificate
# against the CA, for the address the tests dial.
tls_ok() {
  timeout 5 openssl s_client -connect "127.0.0.1:$TLS_PORT" -CAfile "$STATE/tls/ca.pem" \
    -verify_return_error -verify_ip 127.0.0.1 </dev/null >/dev/null 2>&1
}

# One binary SASL_AUTH PLAIN over /dev/tcp; prints the 2-byte status in hex.
sasl_status() {
  local n=$((5 + 2 + ${#USER_} + ${#PASS})) hdr
  hdr=$(printf '\\x%02x' 0x80 0x21 0 5 0 0 0 0 $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)) 0 0 0 0 0 0 0 0 0 0 0 0)
  # shellcheck disable=SC2016
  timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1; printf "${2}PLAIN\0%s\0%s" "$3" "$4" >&3; head -c 24 <&3' \
    _ "$SASL_PORT" "$hdr" "$USER_" "$PASS" | od -An -tx1 -j6 -N2 | tr -d ' \n'
}

case "${1:-}" in
up)
  mkdir -p "$(dirname "$STATE")"
  lock
  install_missing
  start_one plain "$PORT" "port=$PORT" -c 1024 -t 2
  start_one sasl "$SASL_PORT" "port=$SASL_PORT user=$USER_ pass=$PASS" -S -B binary -c 1024 -t 2
  st=$(sasl_status || true)
  [ "$st" = 0000 ] || die "SASL PLAIN login as $USER_ failed on :$SASL_PORT (status '${st:-none}'); see $STATE/sasl.log"
  start_one tls "$TLS_PORT" "port=$TLS_PORT user=$USER_ pass=$PASS tls" -S -B binary -c 1024 -t 2 -Z \
    -o "ssl_chain_cert=$STATE/tls/server.pem,ssl_key=$STATE/tls/server.key"
  tls_ok || die "TLS handshake with :$TLS_PORT did not verify against $STATE/tls/ca.pem; see $STATE/tls.log"
  hold "$PPID"
  printf 'export KV_MEMCACHED_ADDR=127.0.0.1:%s\n' "$PORT"
  printf 'export KV_MEMCACHED_SASL_ADDR=127.0.0.1:%s\n' "$SASL_PORT"
  printf 'export KV_MEMCACHED_TLS_ADDR=127.0.0.1:%s\n' "$TLS_PORT"
  printf 'export KV_MEMCACHED_TLS_CA=%q\n' "$STATE/tls/ca.pem"
  printf 'export KV_MEMCACHED_USER=%q\n' "$USER_"
  printf 'export KV_MEMCACHED_PASS=%q\n' "$PASS"
  ;;
status)
  alive plain && alive sasl && alive tls
  ;;
down)
  mkdir -p "$(dirname "$STATE")"
  lock
  rm -f "$HOLDERS/$PPID"
  others=$(live_holders | tr '\n' ' ')
  if [ -n "${others// /}" ]; then
    log "left running: still held by pid(s) ${others% }"
    exit 0
  fi
  stop_one plain
  stop_one sasl
  stop_one tls
  rm -f "$STATE"/{plain,sasl,tls}.log "$STATE"/sasl/{memcached.conf,sasldb2}
  rm -rf "$STATE/tls" "$HOLDERS"
  rmdir "$STATE/sasl" "$STATE" 2>/dev/null || true
  ;;
*)
  echo "usage: $0 up|down|status" >&2
  exit 2
  ;;
esac
