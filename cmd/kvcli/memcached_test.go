package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memcachedSASL returns the environment for the SASL memcached started by
// scripts/memcached.sh, skipping the test when it is not running unless
// KVWIRE_REQUIRE_MEMCACHED=1 (CI), where a missing memcached fails.
func memcachedSASL(t *testing.T) map[string]string {
	t.Helper()
	addr := os.Getenv("KV_MEMCACHED_SASL_ADDR")
	if addr == "" {
		if os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" {
			t.Fatalf("KV_MEMCACHED_SASL_ADDR is not set but KVWIRE_REQUIRE_MEMCACHED=1: memcached must run (make test starts it)")
		}
		t.Skipf("KV_MEMCACHED_SASL_ADDR not set: run `make test`, or eval \"$(scripts/memcached.sh up)\" first")
	}
	return map[string]string{
		envConnStr:  "memcached://" + addr + "?allow_plain_auth=true",
		envUser:     os.Getenv("KV_MEMCACHED_USER"),
		envPassword: os.Getenv("KV_MEMCACHED_PASS"),
	}
}

func TestMemcachedSASL(t *testing.T) {
	env := memcachedSASL(t)
	key := "kvcli-test:" + t.Name()

	r := runKV(t, env, "", "set", key, "from kvcli")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", key)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "from kvcli", r.stdout)
	r = runKV(t, env, "", "append", key, "!")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", key, "--json")
	assert.Contains(t, r.stdout, `"value":"from kvcli!"`)
	r = runKV(t, env, "", "exists", key)
	assert.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "incr", key+":n", "--initial", "41")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "incr", key+":n")
	assert.Equal(t, "42\n", r.stdout, r)
	r = runKV(t, env, "", "route", key)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "(ketama)")

	r = runKV(t, env, "", "delete", key)
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "delete", key+":n")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", key)
	assert.Equal(t, exitNotFound, r.code, r)
	r = runKV(t, env, "", "exists", key)
	assert.Equal(t, exitNotFound, r.code, r)

	// memcached has no locks: refused at once, not after a timeout.
	r = runKV(t, env, "", "lock", key)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "memcached has no GET_LOCKED")

	// A wrong password: the auth line, exit 1, and the password nowhere.
	const secret = "not-the-kvpass"
	for _, extra := range [][]string{nil, {"-v"}, {"--json"}} {
		r = runKV(t, with(env, envPassword, secret), "", append([]string{"get", key}, extra...)...)
		assert.Equal(t, exitError, r.code, r)
		assert.Contains(t, r.stderr, `kvcli: authentication failed for user "`+env[envUser]+`" (from KVCLI_USER): check the user name and password (KVCLI_PASSWORD)`)
		assert.NotContains(t, r.stdout+r.stderr, secret)
	}
}

// memcached:// offers only PLAIN, in clear: against a memcached with SASL
// kvcli refuses it, the password unsent, unless --allow-plain-auth is
// given, and says so, and where the user came from.
func TestMemcachedPlainAuthNeedsTheFlag(t *testing.T) {
	env := memcachedSASL(t)
	env[envConnStr] = strings.TrimSuffix(env[envConnStr], "?allow_plain_auth=true")
	key := "kvcli-test:" + t.Name()
	r := runKV(t, env, "", "set", key, "v")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, `kvcli: the memcached server requires SASL, and its only mechanism, PLAIN, would send the password of user "`+
		env[envUser]+`" (from KVCLI_USER) in clear: connect with memcacheds:// (TLS), or pass --allow-plain-auth to send it in clear`)
	assert.NotContains(t, r.stdout+r.stderr, env[envPassword])
	r = runKV(t, env, "", "set", key, "v", "--allow-plain-auth")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "--allow-plain-auth", "delete", key)
	require.Equal(t, exitOK, r.code, r)
}

// The exports kvcli serve prints set KVCLI_USER for the mock. A memcached
// without SASL has no users: the user is not used, the password not sent,
// and the commands work (README's walkthrough does this).
func TestMemcachedWithoutSASLIgnoresTheUser(t *testing.T) {
	addr := os.Getenv("KV_MEMCACHED_ADDR")
	if addr == "" {
		memcachedSASL(t) // skips, or fails in CI
	}
	env := map[string]string{envConnStr: "memcached://" + addr, envUser: "Administrator", envPassword: "password"}
	key := "kvcli-test:" + t.Name()
	r := runKV(t, env, "", "set", key, "hi")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", key)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "hi", r.stdout)
	r = runKV(t, env, "", "-u", "someone", "delete", key)
	require.Equal(t, exitOK, r.code, r)
}

// memcacheds:// against the TLS memcached: --cacert verifies it, PLAIN goes
// over TLS without any opt-in, and without the CA the handshake fails with
// the --cacert hint.
func TestMemcachedTLS(t *testing.T) {
	env := memcachedSASL(t)
	addr, ca := os.Getenv("KV_MEMCACHED_TLS_ADDR"), os.Getenv("KV_MEMCACHED_TLS_CA")
	if addr == "" || ca == "" {
		if os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" {
			t.Fatalf("KV_MEMCACHED_TLS_ADDR is not set but KVWIRE_REQUIRE_MEMCACHED=1: memcached must run (make test starts it)")
		}
		t.Skipf("KV_MEMCACHED_TLS_ADDR not set: run `make test`, or eval \"$(scripts/memcached.sh up)\" first")
	}
	env[envConnStr] = "memcacheds://" + addr
	key := "kvcli-test:" + t.Name()
	r := runKV(t, env, "", "set", key, "over tls", "--cacert", ca)
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, with(env, envCACert, ca), "", "get", key)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "over tls", r.stdout)

	r = runKV(t, env, "", "get", key)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "kvcli: TLS handshake failed")
	assert.Contains(t, r.stderr, "pass --cacert FILE or set KVCLI_CACERT")

	// memcacheds:// to memcached's plain port.
	_, port, _ := net.SplitHostPort(os.Getenv("KV_MEMCACHED_SASL_ADDR"))
	r = runKV(t, with(env, envConnStr, "memcacheds://127.0.0.1:"+port), "", "get", key, "--cacert", ca)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, notTLSPortMemcached)
}

// A key whose memcached server refuses connections fails at once, naming
// the server, while the other server's keys work.
func TestMemcachedDeadServerNamed(t *testing.T) {
	live := os.Getenv("KV_MEMCACHED_ADDR")
	if live == "" {
		memcachedSASL(t) // skips, or fails in CI
	}
	dead := closedAddr(t)
	env := map[string]string{envConnStr: "memcached://" + live + "," + dead}
	var onDead string
	for i := 0; i < 1000 && onDead == ""; i++ {
		k := "kvcli-test:" + t.Name() + ":" + strconv.Itoa(i)
		if r := runKV(t, env, "", "route", k); strings.Contains(r.stdout, dead) {
			onDead = k
		}
	}
	require.NotEmpty(t, onDead, "no key routes to %s", dead)
	r := runKV(t, env, "", "get", onDead)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "kvcli: nothing is listening at "+dead)
	r = runKV(t, env, "", "get", onDead, "--json")
	assert.Contains(t, r.stdout, `"kind":"unreachable"`)
	assert.Contains(t, r.stdout, `"retries":0`)
}
