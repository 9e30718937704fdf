package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// KeyValueError.RetryAttempts is the number of retries, and the message says
// that number.
func TestKeyValueErrorMessageCountsTheRetriesAttemptsCounts(t *testing.T) {
	var reasons RetryReasons
	reasons = reasons.With(RetryReasonKVLocked)
	for _, c := range []struct {
		attempts int
		want     string
	}{
		{0, ""},
		{1, " after 1 retry (for [KV_LOCKED])"},
		{3, " after 3 retries (for [KV_LOCKED])"},
	} {
		e := &KeyValueError{Op: "Get", Key: "k", Err: ErrTimeout, RetryAttempts: c.attempts, RetryReasons: reasons}
		msg := e.Error()
		if c.want == "" {
			if strings.Contains(msg, "retr") || strings.Contains(msg, "attempt") {
				t.Errorf("Attempts 0: %q mentions retries", msg)
			}
			continue
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("Attempts %d: %q; want it to say %q", c.attempts, msg, c.want)
		}
	}
}

// An argument refused before sending is a *KeyValueError matching
// ErrInvalidArgument, naming the operation, key and collection.
func TestInvalidArgumentIsAKeyValueError(t *testing.T) {
	col := (&Client{opts: Options{Bucket: "b"}}).Scope("s").Collection("c")
	err := error(col.c.refused("GetAndLock", 0, col, "k", ErrInvalidArgument, fmt.Errorf("negative lock time %v", -1)))
	var kv *KeyValueError
	if !errors.As(err, &kv) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%T %v; want a *KeyValueError matching ErrInvalidArgument", err, err)
	}
	if kv.Op != "GetAndLock" || kv.Key != "k" || kv.Bucket != "b" || kv.Scope != "s" || kv.Collection != "c" ||
		kv.RetryAttempts != 0 || kv.Node != "" || kv.Ambiguous {
		t.Errorf("%+v; want op, key, bucket, scope and collection, nothing sent", kv)
	}
	if want := `GetAndLock "k": invalid argument: negative lock time -1`; err.Error() != want {
		t.Errorf("%q; want %q", err.Error(), want)
	}
}

// A KeyValueError describes one attempt, the last one sent: a Get whose
// first attempt got TMPFAIL from its node, and whose retry was routed to
// another node (the vbucket moved meanwhile) that has no connection, names
// the node that answered TMPFAIL, with that answer's opaque and server
// context; the attempt never sent shows in the cause, which names its
// node.
func TestKeyValueErrorDescribesTheLastAttemptSent(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	const key = "k"
	_, err := col.Upsert(ctx, key, []byte("v"), nil)
	require.NoError(t, err)
	from := owner(mc, key)
	to := 1 - from
	down := mc.Node(to).Addr()
	mc.Node(to).Stop()
	awaitDiagnostics(t, c, down, EndpointReconnecting, nil)
	var sentOpaque atomic.Uint32
	tmpfail := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: key}, 1,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			sentOpaque.Store(r.Packet.Opaque)
			return mockcluster.Action{Status: memdx.StatusTmpFail}, true
		})
	t.Cleanup(tmpfail.Remove)

	asked, proceed := make(chan RetryReason, 1), make(chan struct{})
	strategy := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		if r != RetryReasonKVTemporaryFailure {
			return NoRetry()
		}
		asked <- r
		<-proceed // the test moves the vbucket meanwhile
		return RetryAfter(0)
	})
	done := make(chan error, 1)
	go func() {
		_, err := col.Get(ctx, key, &GetOptions{Timeout: time.Minute, RetryStrategy: strategy})
		done <- err
	}()
	waitAsked(t, asked, RetryReasonKVTemporaryFailure, done)
	moveVbucket(t, mc, key, to)
	awaitTopology(t, c, "the key routes to the stopped node", func(*cluster.Topology) bool { return c.Route(key).Active == down })
	close(proceed)

	err = <-done
	require.ErrorIs(t, err, ErrNotRetried)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	t.Logf("%v", err)
	assert.Equal(t, mc.Node(from).Addr(), kv.Node, "the node of the last attempt sent")
	assert.Equal(t, mc.Bucket(mockcluster.DefaultBucket).VbucketForKey([]byte(key)), kv.Vbucket)
	assert.Equal(t, StatusTmpFail, kv.Status, "its answer")
	assert.Equal(t, sentOpaque.Load(), kv.Opaque, "its request")
	assert.Equal(t, "mockcluster: injected fault", kv.ServerContext)
	assert.Equal(t, 1, kv.RetryAttempts)
	assert.True(t, kv.RetryReasons.Has(RetryReasonKVTemporaryFailure))
	assert.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.Contains(t, err.Error(), "node "+down+" is not available", "the cause names the node of the attempt not sent")
}

// A cause that wraps the sentinel with more ("encoding failure: json:
// unsupported type: chan int", as every Transcoder's error does) keeps
// what it adds in the message: only the sentinel's own text, already said,
// is left out.
func TestKeyValueErrorMessageKeepsWhatTheCauseAddsToTheSentinel(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	_, err := UpsertJSON(context.Background(), col, "u", make(chan int), nil)
	require.ErrorIs(t, err, ErrEncodingFailure)
	assert.Equal(t, `Upsert "u": encoding failure: json: unsupported type: chan int`, err.Error())

	for _, c := range []struct {
		cause error
		want  string
	}{
		{ErrDecodingFailure, `Get "k": decoding failure`},
		{fmt.Errorf("%w: flags 0x%08x", ErrDecodingFailure, 7), `Get "k": decoding failure: flags 0x00000007`},
		{fmt.Errorf("transcoder: %w", ErrDecodingFailure), `Get "k": decoding failure: transcoder: decoding failure`},
	} {
		e := &KeyValueError{Op: "Get", Key: "k", Err: ErrDecodingFailure, Cause: c.cause}
		assert.Equal(t, c.want, e.Error())
	}
}

// KeyValueError.Err is the sentinel of every operation's error, as its
// documentation says: a timeout's is its kind (ErrAmbiguousTimeout or
// ErrUnambiguousTimeout), a mutation lost with its connection ErrAmbiguous,
// never nil (a caller's kv.Err.Error() would panic, and switch kv.Err
// would find no case).
func TestKeyValueErrorErrIsNeverNil(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	sentinel := func(err error) error {
		t.Helper()
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv)
		require.ErrorIs(t, err, kv.Err, "Err is one of the error's sentinels")
		return kv.Err
	}

	// Applied, then the connection closed before the answer.
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: "dropped"},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	_, err := col.Upsert(ctx, "dropped", nil, nil)
	assert.Equal(t, ErrAmbiguous, sentinel(err), "%v", err)

	// Answers held until the test ends (released at cleanup); arrived
	// tells which requests reached the node.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var arrived sync.Map
	hold := func(op memdx.OpCode, key string) {
		f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{op}, Key: key,
			Func: func(*mockcluster.Request) bool { arrived.Store(key, true); return true }},
			Action: mockcluster.Action{Hold: release}})
		t.Cleanup(f.Remove)
	}

	// A read never answered: not applied, whenever its deadline came (a
	// read is never ambiguous).
	hold(memdx.OpGet, "held-get")
	_, err = col.Get(ctx, "held-get", &GetOptions{Timeout: 20 * time.Millisecond})
	assert.Equal(t, ErrUnambiguousTimeout, sentinel(err), "%v", err)

	// A write the node received and never answered: may have been
	// applied. Whether it was written before its deadline depends on the
	// machine's speed; the node's own record says which it was, so the
	// test tries again (with another key) until one was received.
	for i := 0; ; i++ {
		key := fmt.Sprintf("held-%d", i)
		hold(memdx.OpSet, key)
		_, err = col.Upsert(ctx, key, nil, &UpsertOptions{Timeout: 20 * time.Millisecond})
		if _, ok := arrived.Load(key); ok {
			assert.Equal(t, ErrAmbiguousTimeout, sentinel(err), "%v", err)
			break
		}
		// Not received: a timeout that may or may not have written it.
		require.ErrorIs(t, err, ErrTimeout)
		require.Less(t, i, 100, "no Upsert reached the node within 20 ms in 100 tries")
	}
}

// StatusReason is the retry reason the status policy gave the last
// answer, whether or not the retry was made (here none is): the error
// map's for a status it says to retry (EBUSY), the table's for LOCKED,
// none for a status that ends the operation.
func TestKeyValueErrorStatusReason(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	for _, tc := range []struct {
		status memdx.Status
		want   RetryReason
	}{
		{memdx.StatusBusy, RetryReasonKVErrorMapRetryIndicated},
		{memdx.StatusLocked, RetryReasonKVLocked},
		{memdx.StatusKeyNotFound, RetryReasonUnknown},
	} {
		key := "k" + tc.status.String()
		h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: key, OpCodes: []memdx.OpCode{memdx.OpGet}},
			Action: mockcluster.Action{Status: tc.status}})
		// Not retried: the error is the first answer's, whatever the
		// machine's speed (a timeout could end with an attempt in
		// flight, and no status).
		noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
		_, err := col.Get(ctx, key, &GetOptions{Timeout: time.Minute, RetryStrategy: noRetry})
		h.Remove()
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv)
		assert.Equal(t, Status(tc.status), kv.Status, "%v", err)
		assert.Equal(t, tc.want, kv.StatusReason, "%v", err)
	}
}

// The server's error ref (XERROR) is what kv_engine's log names the
// failure by: the error's message carries it, as it carries the context.
func TestKeyValueErrorMessageCarriesTheServersRef(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Status: memdx.StatusInvalidArgs,
			Value: []byte(`{"error":{"context":"bad frame","ref":"9e1a7c52-0d4b"}}`)}})
	defer h.Remove()
	_, err := c.DefaultCollection().Get(context.Background(), "k", nil)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	require.Equal(t, "9e1a7c52-0d4b", kv.ServerErrorRef)
	assert.Contains(t, err.Error(), "[server: bad frame; ref 9e1a7c52-0d4b]")
}

// The server's words (XERROR's context and ref) are said once in the
// error's message, in its brackets beside the status, though the cause,
// the last attempt's status error (a timeout's last error, a refused
// retry's cause), says them too when read alone: its own text and the
// fields are what they were. The timeout runs on a fake clock, which the
// strategy moves past the deadline once the TMPFAIL is in: the deadline
// never passes while the attempt is in flight, however loaded the machine.
func TestKeyValueErrorMessageSaysTheServersWordsOnce(t *testing.T) {
	t.Parallel()
	const ctxText, ref = "vbucket warming up", "9e1a7c52-0d4b"
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour,
		HealthCheck: HealthCheckOptions{Disabled: true}})
	faultGets(t, mc, "k", mockcluster.Action{Status: memdx.StatusTmpFail,
		Value: []byte(`{"error":{"context":"` + ctxText + `","ref":"` + ref + `"}}`)}, 0)
	timeout := RetryStrategyFunc(func(_ RetryRequest, r RetryReason) RetryAction {
		fc.Advance(time.Hour) // past the deadline: the retry would run into it
		return RetryAfter(0)
	})
	refuse := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	for _, tc := range []struct {
		name     string
		strategy RetryStrategy
		sentinel error
	}{
		{"timeout", timeout, ErrUnambiguousTimeout},
		{"not retried", refuse, ErrNotRetried},
	} {
		_, err := c.DefaultCollection().Get(context.Background(), "k",
			&GetOptions{Timeout: time.Minute, RetryStrategy: tc.strategy})
		require.ErrorIs(t, err, tc.sentinel, tc.name)
		var kv *KeyValueError
		require.ErrorAs(t, err, &kv, tc.name)
		assert.Equal(t, StatusTmpFail, kv.Status, tc.name)
		assert.Equal(t, ctxText, kv.ServerContext, tc.name)
		assert.Equal(t, ref, kv.ServerErrorRef, tc.name)
		msg := err.Error()
		assert.Contains(t, msg, "(status 0x86 ETMPFAIL) [server: "+ctxText+"; ref "+ref+"]", tc.name)
		assert.Equal(t, 1, strings.Count(msg, ctxText), "%s: the context once: %s", tc.name, msg)
		assert.Equal(t, 1, strings.Count(msg, ref), "%s: the ref once: %s", tc.name, msg)
		// The cause still names the last attempt's status; read alone, it
		// says the server's words itself.
		assert.Contains(t, msg, "GET failed with status ETMPFAIL (0x86)", tc.name)
		var se *memdx.StatusError
		if te := (*retry.TimeoutError)(nil); errors.As(kv.Cause, &te) {
			require.ErrorAs(t, te.LastErr, &se, tc.name)
		} else {
			require.ErrorAs(t, kv.Cause, &se, tc.name)
		}
		assert.Equal(t, ctxText, se.Context, tc.name)
		assert.Equal(t, ref, se.Ref, tc.name)
		assert.Contains(t, kv.Cause.Error(), ": "+ctxText+" (ref "+ref+")", tc.name)
	}
}
