package main

import (
	"os"
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
		envConnStr:  "memcached://" + addr,
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
		assert.Contains(t, r.stderr, `kvcli: authentication failed for user "`+env[envUser]+`": check the user name and password (KVCLI_PASSWORD)`)
		assert.NotContains(t, r.stdout+r.stderr, secret)
	}
}
