package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
)

// Plain memcached (Debian's package, started by scripts/memcached.sh): the
// client takes the memcached:// path: no HELLO, no buckets, ketama routing.
func TestMemcachedPlain(t *testing.T) {
	addr := memcachedAddr(t, false)
	ctx := context.Background()
	obs := &recorder{}
	c, err := Connect(ctx, "memcached://"+addr, testOptions(&Options{Observer: obs}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := fmt.Sprintf("kvwire-client-%d", time.Now().UnixNano())

	m, err := col.Upsert(ctx, key, []byte("hello"), &UpsertOptions{Flags: 7, Expiry: time.Minute})
	require.NoError(t, err)
	require.NotZero(t, m.Cas)
	g, err := col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(g.Value))
	assert.Equal(t, uint32(7), g.Flags)
	assert.Equal(t, m.Cas, g.Cas)

	_, err = col.Insert(ctx, key, []byte("x"), nil)
	assert.ErrorIs(t, err, ErrDocumentExists)
	_, err = col.Replace(ctx, key, []byte("x"), &ReplaceOptions{Cas: g.Cas + 1})
	assert.ErrorIs(t, err, ErrCasMismatch)
	_, err = col.Append(ctx, key, []byte(" world"), nil)
	require.NoError(t, err)
	g, err = col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(g.Value))

	ex, err := col.Exists(ctx, key, nil)
	require.NoError(t, err)
	assert.True(t, ex.Exists)
	_, err = col.Remove(ctx, key, nil)
	require.NoError(t, err)
	ex, err = col.Exists(ctx, key, nil)
	require.NoError(t, err)
	assert.False(t, ex.Exists)
	_, err = col.Get(ctx, key, nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)

	// memcached:// stores flags 0 unless the caller sets them, as other
	// memcached clients do; the typed helpers store their format's.
	_, err = col.Upsert(ctx, key, []byte("raw"), nil)
	require.NoError(t, err)
	g, err = col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Zero(t, g.Flags)
	_, err = UpsertJSON(ctx, col, key, map[string]int{"n": 1}, nil)
	require.NoError(t, err)
	v, g, err := GetJSON[map[string]int](ctx, col, key, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"n": 1}, v)
	assert.Equal(t, CommonFlagsJSON, g.Flags)
	_, err = UpsertString(ctx, col, key, "text", nil)
	require.NoError(t, err)
	g, err = col.Get(ctx, key, nil)
	require.NoError(t, err)
	var s string
	require.NoError(t, g.ContentAs(&s))
	assert.Equal(t, "text", s)
	_, err = col.Remove(ctx, key, nil)
	require.NoError(t, err)

	zero := uint64(40)
	r, err := col.Increment(ctx, key+"-n", &IncrementOptions{Initial: &zero})
	require.NoError(t, err)
	assert.Equal(t, uint64(40), r.Value)
	r, err = col.Increment(ctx, key+"-n", &IncrementOptions{Delta: 2})
	require.NoError(t, err)
	assert.Equal(t, uint64(42), r.Value)

	ping := c.Ping(ctx)
	require.Len(t, ping, 1)
	assert.NoError(t, ping[0].Err)

	_, err = c.Scope("s").Collection("c").Get(ctx, key, nil)
	assert.ErrorIs(t, err, ErrFeatureNotAvailable, "memcached has no collections")

	// Commands memcached does not have are refused at once, never sent
	// (memcached would misread the stream).
	for name, f := range map[string]func() error{
		"GetAndLock": func() error {
			_, err := col.GetAndLock(ctx, key, time.Second, &GetAndLockOptions{Timeout: atOnceTimeout})
			return err
		},
		"Unlock": func() error { return col.Unlock(ctx, key, 1, &UnlockOptions{Timeout: atOnceTimeout}) },
		"Durability": func() error {
			_, err := col.Upsert(ctx, key, []byte("v"), &UpsertOptions{Durability: DurabilityMajority, Timeout: atOnceTimeout})
			return err
		},
	} {
		sent := len(obs.attempts())
		err := f()
		assert.ErrorIs(t, err, ErrFeatureNotAvailable, name)
		assert.NotErrorIs(t, err, ErrTimeout, name)
		assert.Len(t, obs.attempts(), sent, "%s: never sent", name)
	}
	g, err = col.Get(ctx, key+"-n", nil)
	require.NoError(t, err, "the connection is still in step")
	assert.Equal(t, "42", string(g.Value))
}

// Two memcached "servers" (the same one twice under two names) route by
// ketama; every key lands on one of them and round-trips.
func TestMemcachedKetamaRouting(t *testing.T) {
	addr := memcachedAddr(t, false)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	ctx := context.Background()
	rec := &recorder{}
	c, err := Connect(ctx, fmt.Sprintf("memcached://%s:%s,localhost:%s", host, port, port), testOptions(&Options{Observer: rec}))
	require.NoError(t, err)
	defer c.Close()
	seen := map[string]int{}
	for i := 0; i < 64; i++ {
		k := fmt.Sprintf("kvwire-ketama-%d-%d", time.Now().UnixNano(), i)
		ri := c.Route(k)
		require.True(t, ri.Ketama)
		seen[ri.Active]++
		_, err := c.DefaultCollection().Upsert(ctx, k, []byte("v"), nil)
		require.NoError(t, err)
	}
	assert.Len(t, seen, 2, "keys spread over both servers: %v", seen)
	atts := rec.attempts()
	require.Len(t, atts, 64)
	for _, a := range atts {
		assert.True(t, a.Ketama)
		assert.Equal(t, seen[a.Node] > 0, true, "attempt went to a ketama server")
	}
}

// SASL over TCP: memcached offers only PLAIN, sent in clear, so it needs the
// opt-in (see TestMemcachedPlainAuthNeedsTLSOrOptIn for the bytes).
func TestMemcachedSASL(t *testing.T) {
	addr := memcachedAddr(t, true)
	user, pass := os.Getenv("KV_MEMCACHED_USER"), os.Getenv("KV_MEMCACHED_PASS")
	ctx := context.Background()
	_, err := Connect(ctx, "memcached://"+addr, testOptions(&Options{Username: user, Password: pass}))
	require.ErrorIs(t, err, ErrPlainAuthRefused, "no opt-in, no TLS")
	require.ErrorIs(t, err, ErrAuthenticationFailure)

	c, err := Connect(ctx, "memcached://"+addr+"?allow_plain_auth=true", testOptions(&Options{Username: user, Password: pass}))
	require.NoError(t, err)
	defer c.Close()
	key := fmt.Sprintf("kvwire-sasl-%d", time.Now().UnixNano())
	_, err = c.DefaultCollection().Upsert(ctx, key, []byte("v"), nil)
	require.NoError(t, err)
	g, err := c.DefaultCollection().Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(g.Value))

	// A refused password ends Connect: the server is not dialed again.
	p, err := faultnode.NewProxy(addr)
	require.NoError(t, err)
	defer p.Close()
	_, err = Connect(ctx, "memcached://"+p.Addr(), testOptions(&Options{Username: user, Password: pass + "-wrong", AllowPlainAuthWithoutTLS: true}))
	assert.ErrorIs(t, err, ErrAuthenticationFailure)
	assert.Equal(t, 1, p.Accepted(), "connections to the server that refused the password")
	assert.NotContains(t, err.Error(), pass+"-wrong")

	// Without credentials the SASL instance refuses everything.
	_, err = Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAuthenticationFailure, "memcached answers AUTH_ERROR before SASL: %v", err)
}

// memcacheds:// dials TLS with the server's certificate verified (the TLS
// instance of scripts/memcached.sh, whose CA is KV_MEMCACHED_TLS_CA), and
// sends SASL PLAIN over it without any opt-in.
func TestMemcachedTLS(t *testing.T) {
	addr, pool := memcachedTLS(t)
	user, pass := os.Getenv("KV_MEMCACHED_USER"), os.Getenv("KV_MEMCACHED_PASS")
	ctx := context.Background()
	c, err := Connect(ctx, "memcacheds://"+addr, testOptions(&Options{Username: user, Password: pass,
		TLSConfig: &tls.Config{RootCAs: pool}}))
	require.NoError(t, err)
	defer c.Close()
	key := fmt.Sprintf("kvwire-tls-%d", time.Now().UnixNano())
	_, err = c.DefaultCollection().Upsert(ctx, key, []byte("over tls"), nil)
	require.NoError(t, err)
	g, err := c.DefaultCollection().Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "over tls", string(g.Value))

	// Verification is on: without the test CA the certificate is refused,
	// at once and before any password goes out.
	_, err = Connect(ctx, "memcacheds://"+addr, testOptions(&Options{Username: user, Password: pass}))
	require.ErrorIs(t, err, ErrTLS)
	var unknownCA x509.UnknownAuthorityError
	assert.ErrorAs(t, err, &unknownCA)

	// tls_verify=none skips verification (insecure, and said to be).
	c2, err := Connect(ctx, "memcacheds://"+addr+"?tls_verify=none", testOptions(&Options{Username: user, Password: pass}))
	require.NoError(t, err)
	_, err = c2.DefaultCollection().Get(ctx, key, nil)
	require.NoError(t, err)
	require.NoError(t, c2.Close())

	// localhost is in the certificate too; a name that is not fails.
	_, port, _ := net.SplitHostPort(addr)
	_, err = Connect(ctx, "memcacheds://localhost:"+port, testOptions(&Options{Username: user, Password: pass,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "not-in-the-cert.example"}}))
	require.ErrorIs(t, err, ErrTLS)

	// The wrong password over TLS is refused by the server.
	_, err = Connect(ctx, "memcacheds://"+addr, testOptions(&Options{Username: user, Password: pass + "-wrong",
		TLSConfig: &tls.Config{RootCAs: pool}}))
	assert.ErrorIs(t, err, ErrAuthenticationFailure)
	assert.NotErrorIs(t, err, ErrPlainAuthRefused)
}

// memcachedTLS returns the TLS memcached's address and a pool holding its CA.
func memcachedTLS(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	addr := os.Getenv("KV_MEMCACHED_TLS_ADDR")
	ca := os.Getenv("KV_MEMCACHED_TLS_CA")
	if addr == "" || ca == "" {
		if os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" {
			t.Fatalf("KV_MEMCACHED_TLS_ADDR or KV_MEMCACHED_TLS_CA is not set but KVWIRE_REQUIRE_MEMCACHED=1: memcached must run (make test starts it)")
		}
		t.Skipf("KV_MEMCACHED_TLS_ADDR not set: run `make test`, or eval \"$(scripts/memcached.sh up)\" first")
	}
	pem, err := os.ReadFile(ca)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem), "no certificate in %s", ca)
	return addr, pool
}

// memcached answers NOT_STORED to APPEND and PREPEND both of a key it does
// not hold and of one whose value the data would make larger than its item
// size limit (-I, 1 MiB by default): the error must not say only that the
// document was not found when it is there.
func TestMemcachedConcatNotStoredSaysWhy(t *testing.T) {
	addr := memcachedAddr(t, false)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := fmt.Sprintf("kvwire-concat-big-%d", time.Now().UnixNano())
	half := make([]byte, 700<<10)
	_, err = col.Upsert(ctx, key, half, &UpsertOptions{Expiry: time.Minute})
	require.NoError(t, err)

	_, err = col.Append(ctx, key, half, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "item size limit", "the document exists: %v", err)
	_, err = col.Prepend(ctx, key, half, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "item size limit", "the document exists: %v", err)
	g, err := col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Len(t, g.Value, len(half), "unchanged")

	// A missing key still matches ErrDocumentNotFound, as before.
	_, err = col.Append(ctx, key+"-missing", []byte("x"), nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
	assert.Contains(t, err.Error(), "item size limit")
}

// What the docs say of a value over memcached's item size limit (-I, 1 MiB
// by default): Upsert fails with ErrValueTooLarge, not ambiguous, and
// memcached has dropped the key's previous value (it unlinks the key of a
// SET it cannot store, so that a reader does not get stale data); Replace
// and Insert leave the key as it was.
func TestMemcachedUpsertTooLargeDropsOldValue(t *testing.T) {
	addr := memcachedAddr(t, false)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := fmt.Sprintf("kvwire-too-large-%d", time.Now().UnixNano())
	big := make([]byte, 2<<20)
	for _, k := range []string{key + "-set", key + "-replace"} {
		_, err = col.Upsert(ctx, k, []byte("old"), &UpsertOptions{Expiry: time.Minute})
		require.NoError(t, err)
	}

	_, err = col.Replace(ctx, key+"-replace", big, nil)
	require.ErrorIs(t, err, ErrValueTooLarge)
	g, err := col.Get(ctx, key+"-replace", nil)
	require.NoError(t, err)
	assert.Equal(t, "old", string(g.Value))

	_, err = col.Upsert(ctx, key+"-set", big, nil)
	require.ErrorIs(t, err, ErrValueTooLarge)
	assert.NotErrorIs(t, err, ErrAmbiguous)
	_, err = col.Get(ctx, key+"-set", nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound, "memcached dropped the old value")
}

// A memcached started with an item size limit over what kvwire reads
// (-I 30m; kvwire reads bodies up to memdx.DefaultMaxBodyLength, 20 MiB
// and 64 KiB) holds values whose GET answer kvwire refuses. The same answer
// comes again to every retry: the Get fails at once with ErrValueTooLarge,
// naming the limit, rather than redialing and resending until its timeout.
func TestMemcachedGetOfAnswerOverReadLimitFailsAtOnce(t *testing.T) {
	addr := memcachedtest.StartArgs(t, "-I", "30m", "-m", "128")
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(&Options{KVTimeout: 5 * time.Second}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	_, err = col.Upsert(ctx, "big", make([]byte, memdx.DefaultMaxBodyLength), nil)
	require.NoError(t, err, "memcached -I 30m stores it")
	_, err = col.Upsert(ctx, "small", []byte("v"), nil)
	require.NoError(t, err)

	_, err = col.Get(ctx, "big", nil)
	require.ErrorIs(t, err, ErrValueTooLarge)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrAmbiguous)
	assert.Contains(t, err.Error(), "exceeds the limit")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Zero(t, kv.RetryAttempts, "not retried: the answer would be the same")

	g, err := col.Get(ctx, "small", nil)
	require.NoError(t, err, "the client redials and serves the other keys")
	assert.Equal(t, "v", string(g.Value))
}

// The same in a GetMany (binary quiet gets: the oversized answer follows
// another key's in one read): the oversized key fails at once with
// ErrValueTooLarge, the others are read, rather than every key of the
// server's group redialing and resending until the timeout.
func TestMemcachedGetManyAnswerOverReadLimit(t *testing.T) {
	addr := memcachedtest.StartArgs(t, "-I", "30m", "-m", "128")
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr+"?binary_multiget=true", testOptions(&Options{KVTimeout: 5 * time.Second}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	_, err = col.Upsert(ctx, "big", make([]byte, memdx.DefaultMaxBodyLength), nil)
	require.NoError(t, err)
	_, err = col.Upsert(ctx, "small", []byte("v"), nil)
	require.NoError(t, err)

	res := col.GetMany(ctx, []string{"small", "big", "missing"}, nil)
	require.Len(t, res, 3)
	require.NoError(t, res[0].Err)
	assert.Equal(t, "v", string(res[0].Value))
	assert.ErrorIs(t, res[1].Err, ErrValueTooLarge)
	assert.NotErrorIs(t, res[1].Err, ErrTimeout)
	assert.ErrorIs(t, res[2].Err, ErrDocumentNotFound)
}
