package client

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// inProcessProbeTimeout is the HealthCheck.ProbeTimeout of the clients this
// package's tests start (testOptions), except those of the health check
// itself, which keep the default: the servers run in the test's own
// process (or on the same machine), so a busy machine delays their answers
// as much as the client's, and the default second of silence would close
// connections, or fail bootstraps, that no test here means to.
const inProcessProbeTimeout = time.Minute

// testOptions returns o (new Options when nil) with
// HealthCheck.ProbeTimeout set to inProcessProbeTimeout unless the test
// set one.
func testOptions(o *Options) *Options {
	if o == nil {
		o = &Options{}
	}
	if o.HealthCheck.ProbeTimeout == 0 {
		o.HealthCheck.ProbeTimeout = inProcessProbeTimeout
	}
	return o
}

// newMock starts a mock cluster that the test closes.
func newMock(t *testing.T, o mockcluster.Options) *mockcluster.Cluster {
	t.Helper()
	mc, err := mockcluster.New(o)
	require.NoError(t, err)
	t.Cleanup(mc.Close)
	return mc
}

// addCollections adds scope and its collections to the mock's default
// bucket.
func addCollections(t *testing.T, mc *mockcluster.Cluster, scope string, collections ...string) {
	t.Helper()
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope(scope)
	require.NoError(t, err)
	for _, name := range collections {
		_, err = b.AddCollection(scope, name)
		require.NoError(t, err)
	}
}

// connect opens a client on the mock's default bucket.
func connect(t *testing.T, mc *mockcluster.Cluster, o *Options) *Client {
	t.Helper()
	o = testOptions(o)
	if o.Username == "" {
		o.Username, o.Password = mockcluster.DefaultUser, mockcluster.DefaultPassword
	}
	if o.Bucket == "" {
		o.Bucket = mockcluster.DefaultBucket
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, mc.ConnString(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// recorder is an Observer that keeps every attempt.
type recorder struct {
	mu   sync.Mutex
	ends []AttemptInfo
	errs []error
}

func (r *recorder) AttemptStart(AttemptInfo) {}

func (r *recorder) AttemptEnd(i AttemptInfo, err error) {
	r.mu.Lock()
	r.ends = append(r.ends, i)
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *recorder) attempts() []AttemptInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]AttemptInfo(nil), r.ends...)
}

// byOp groups attempts by operation id.
func (r *recorder) byOp() map[uint64][]AttemptInfo {
	out := map[uint64][]AttemptInfo{}
	for _, a := range r.attempts() {
		out[a.OperationID] = append(out[a.OperationID], a)
	}
	return out
}

// memcachedAddr returns the plain (or SASL) memcached address started by
// scripts/memcached.sh, skipping the test when it is not running, unless
// KVWIRE_REQUIRE_MEMCACHED=1 (CI), where a missing memcached fails.
func memcachedAddr(t *testing.T, sasl bool) string {
	t.Helper()
	v := "KV_MEMCACHED_ADDR"
	if sasl {
		v = "KV_MEMCACHED_SASL_ADDR"
	}
	addr := os.Getenv(v)
	if addr == "" {
		if os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" {
			t.Fatalf("%s is not set but KVWIRE_REQUIRE_MEMCACHED=1: memcached must run (make test starts it)", v)
		}
		t.Skipf("%s not set: run `make test`, or eval \"$(scripts/memcached.sh up)\" first", v)
	}
	return addr
}

const (
	retryKVLocked                  = RetryReasonKVLocked
	retryKVTemporaryFailure        = RetryReasonKVTemporaryFailure
	retryKVErrorMapRetryIndicated  = RetryReasonKVErrorMapRetryIndicated
	retrySocketClosedWhileInFlight = RetryReasonSocketClosedWhileInFlight
	retryKVNotMyVbucket            = RetryReasonKVNotMyVbucket
)

func asKV(err error, kv **KeyValueError) bool { return errors.As(err, kv) }

// fakeClock makes a *retry.FakeClock a client Clock.
type fakeClock struct{ *retry.FakeClock }

func (f fakeClock) NewTimer(d time.Duration) Timer { return f.FakeClock.NewTimer(d) }

// faultGets makes mc answer GETs of key with a (at most times times when
// times > 0) until the test ends; the Control removes it earlier.
func faultGets(t *testing.T, mc *mockcluster.Cluster, key string, a mockcluster.Action, times int) *mockcluster.Control {
	t.Helper()
	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: key},
		Action: a, Times: times})
	t.Cleanup(f.Remove)
	return f
}
