package rangescan

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// fakeRequests are a scan's requests played by the test: each vbucket's
// continues answer from a script, in turn across the vbucket's creates,
// and every request is logged in the order made ("create 0 after b",
// "continue 0#1", "cancel 0#1": vbucket 0, the scan of its first create).
type fakeRequests struct {
	mu      sync.Mutex
	log     []string
	creates int
	answers map[uint16][]answer
	// createStarted, when set, is called as each create starts (outside
	// the lock).
	createStarted func(vb uint16)
	inFlight      int // continues in flight
	maxInFlight   int
	// held are the causes of the held continues' contexts' ends.
	held []error
}

// answer is one continue's answer: keys (each a document whose value is
// its key), then status; or, with err, keys then the request failing with
// err (a connection lost in the middle of the answer). hold: it first
// waits until the scan's context ends, or until release is closed.
type answer struct {
	keys    []string
	status  memdx.Status // RangeScanMore when 0
	err     error
	hold    bool
	release <-chan struct{}
}

// more and complete are continues answering keys, the scan not over, and
// over.
func more(keys ...string) answer { return answer{keys: keys, status: memdx.StatusRangeScanMore} }
func complete(keys ...string) answer {
	return answer{keys: keys, status: memdx.StatusRangeScanComplete}
}

// errEmpty is the error of a create whose range has no document.
var errEmpty = errors.New("nothing in the range")

// restartError is a continue's error that makes the scan create the
// vbucket's scan again, cancelling it first with cancel.
type restartError struct{ cancel bool }

func (e restartError) Error() string {
	return fmt.Sprintf("the vbucket moved (cancel first: %v)", e.cancel)
}

// invalidError is the fake's Invalid.
type invalidError struct {
	vb    uint16
	cause error
}

func (e *invalidError) Error() string { return fmt.Sprintf("vbucket %d: %v", e.vb, e.cause) }
func (e *invalidError) Unwrap() error { return e.cause }

func (f *fakeRequests) logf(format string, args ...any) {
	f.mu.Lock()
	f.log = append(f.log, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeRequests) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func scanID(n int) memdx.RangeScanID { return memdx.RangeScanID{byte(n)} }

func (f *fakeRequests) Create(vb uint16, cfg *memdx.RangeScanCreate) (memdx.RangeScanID, *cluster.Node, error) {
	if f.createStarted != nil {
		f.createStarted(vb)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	from := "start"
	switch {
	case cfg.Range != nil && cfg.Range.ExclusiveStart:
		from = "after " + string(cfg.Range.Start)
	case cfg.Range != nil:
		from = "from " + string(cfg.Range.Start)
	}
	if q := f.answers[vb]; len(q) == 0 {
		f.log = append(f.log, fmt.Sprintf("create %d %s: empty", vb, from))
		return memdx.RangeScanID{}, nil, fmt.Errorf("vbucket %d: %w", vb, errEmpty)
	}
	f.creates++
	f.log = append(f.log, fmt.Sprintf("create %d %s", vb, from))
	return scanID(f.creates), nil, nil
}

func (f *fakeRequests) Continue(ctx context.Context, _ *cluster.Node, vb uint16, req memdx.RangeScanContinue, dec *Decoder) error {
	f.mu.Lock()
	f.log = append(f.log, fmt.Sprintf("continue %d#%d", vb, req.ID[0]))
	a := f.answers[vb][0]
	f.answers[vb] = f.answers[vb][1:]
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if a.hold {
		select {
		case <-ctx.Done():
			f.mu.Lock()
			f.held = append(f.held, context.Cause(ctx))
			f.mu.Unlock()
			return ctx.Err()
		case <-a.release:
		}
	}
	if len(a.keys) > 0 {
		if handled, err := dec.Handle(keysPacket(memdx.StatusSuccess, a.keys...)); !handled || err != nil {
			return fmt.Errorf("handled %v: %w", handled, err)
		}
	}
	if a.err != nil {
		return a.err
	}
	handled, err := dec.Handle(keysPacket(a.status))
	if !handled || err != nil {
		return fmt.Errorf("handled %v: %w", handled, err)
	}
	return nil
}

func (f *fakeRequests) Cancel(_ *cluster.Node, vb uint16, id memdx.RangeScanID) {
	f.logf("cancel %d#%d", vb, id[0])
}

func (f *fakeRequests) Empty(err error) bool { return errors.Is(err, errEmpty) }

func (f *fakeRequests) Invalid(vb uint16, _ *cluster.Node, cause error) error {
	return &invalidError{vb, cause}
}

func (f *fakeRequests) Restart(err error) (restart, cancel bool) {
	var re restartError
	if errors.As(err, &re) {
		return true, re.cancel
	}
	return false, false
}

// keysPacket is a key-only continue's answer packet with status and keys.
func keysPacket(status memdx.Status, keys ...string) *memdx.Packet {
	var v []byte
	for _, k := range keys {
		v = memdx.AppendRangeScanKey(v, []byte(k))
	}
	return &memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpRangeScanContinue, Status: status,
		Extras: memdx.AppendRangeScanContent(nil, memdx.RangeScanKeys), Value: v}
}

// rangeConfig scans [start, end] of vbs, one at a time.
func rangeConfig(start, end string, vbs ...uint16) Config {
	return Config{KeyOnly: true, Range: &memdx.RangeScanRange{Start: []byte(start), End: []byte(end)},
		ItemLimit: 10, ByteLimit: 1 << 20, Vbuckets: vbs, Concurrency: 1}
}

// drain takes every batch of r until its Out closes, and returns the keys
// of each batch.
func drain(r *Run) [][]string {
	var got [][]string
	for b := range r.Out() {
		var keys []string
		for _, it := range b {
			keys = append(keys, it.ID)
		}
		got = append(got, keys)
	}
	return got
}

// A scan creates each vbucket's scan, asks for its batches until the
// server says it is complete, and passes them on in order; a vbucket whose
// range is empty (the create says so) is scanned, with nothing in it. A
// scan complete on the server is not cancelled.
func TestScanReadsEveryVbucketToItsEnd(t *testing.T) {
	f := &fakeRequests{answers: map[uint16][]answer{
		0: {more("a", "b"), complete("c")},
		2: {complete("x")},
	}}
	r := Start(t.Context(), rangeConfig("a", "z", 0, 1, 2), f)
	assert.Equal(t, [][]string{{"a", "b"}, {"c"}, {"x"}}, drain(r))
	err, done, _ := r.Result()
	require.NoError(t, err)
	assert.True(t, done, "every vbucket was scanned to its end")
	assert.Equal(t, []string{
		"create 0 from a", "continue 0#1", "continue 0#1",
		"create 1 from a: empty",
		"create 2 from a", "continue 2#2",
	}, f.Log())
}

// A key the server returns that is outside the range scanned fails the
// scan (Invalid, wrapping memdx.ErrMalformed, naming the key and the
// range) before any key of its batch reaches the caller, and the scan is
// cancelled on the server.
func TestScanRefusesAKeyOutsideTheRange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rng    memdx.RangeScanRange
		key    string
		refuse string // "" when the key is in the range
	}{
		{"before the start", memdx.RangeScanRange{Start: []byte("b"), End: []byte("d")}, "a", `key "a" is outside the range scanned, ["b", "d"]`},
		{"after the end", memdx.RangeScanRange{Start: []byte("b"), End: []byte("d")}, "d0", `key "d0" is outside the range scanned, ["b", "d"]`},
		{"the start, exclusive", memdx.RangeScanRange{Start: []byte("b"), ExclusiveStart: true, End: []byte("d")}, "b", `key "b" is outside the range scanned, ("b", "d"]`},
		{"the end, exclusive", memdx.RangeScanRange{Start: []byte("b"), End: []byte("d"), ExclusiveEnd: true}, "d", `key "d" is outside the range scanned, ["b", "d")`},
		{"the start, inclusive", memdx.RangeScanRange{Start: []byte("b"), End: []byte("d")}, "b", ""},
		{"the end, inclusive", memdx.RangeScanRange{Start: []byte("b"), End: []byte("d")}, "d", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRequests{answers: map[uint16][]answer{7: {complete(tc.key)}}}
			cfg := rangeConfig("", "", 7)
			cfg.Range = &tc.rng
			r := Start(t.Context(), cfg, f)
			got := drain(r)
			err, done, _ := r.Result()
			if tc.refuse == "" {
				require.NoError(t, err)
				assert.True(t, done)
				assert.Equal(t, [][]string{{tc.key}}, got)
				return
			}
			assert.Empty(t, got, "no key of a batch with a key outside the range is passed on")
			var ie *invalidError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, uint16(7), ie.vb)
			assert.ErrorIs(t, err, memdx.ErrMalformed)
			assert.ErrorContains(t, err, tc.refuse)
			assert.False(t, done)
			assert.Equal(t, "cancel 7#1", f.Log()[len(f.Log())-1], "the scan is cancelled on the server")
		})
	}
}

// A continue answers at least one item unless the scan ended or failed
// (kv_engine's range-scan docs): an empty "more" fails the scan as
// malformed and cancels it on the server, rather than being asked again
// forever.
func TestScanRefusesAnEmptyContinueThatIsNotTheEnd(t *testing.T) {
	f := &fakeRequests{answers: map[uint16][]answer{7: {more("a"), more(), complete("b")}}}
	r := Start(t.Context(), rangeConfig("a", "z", 7), f)
	got := drain(r)
	err, done, _ := r.Result()
	assert.Equal(t, [][]string{{"a"}}, got)
	var ie *invalidError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, memdx.ErrMalformed)
	assert.ErrorContains(t, err, "with no item")
	assert.False(t, done)
	assert.Equal(t, "cancel 7#1", f.Log()[len(f.Log())-1], "the scan is cancelled on the server")
}

// Within a vbucket's stream each key is after the one before it: in one
// batch, across batches, and across a restart (the new scan starts after
// the last key returned). A key that is not fails the scan; what came in
// earlier batches was passed on, the failing batch is not.
func TestScanRefusesAKeyNotAfterTheOneBefore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []answer
		passed  [][]string
		refuse  string
	}{
		{"in one batch", []answer{complete("b", "c", "c")}, nil, `key "c" is not after the key before it, "c"`},
		{"going back in one batch", []answer{complete("c", "b")}, nil, `key "b" is not after the key before it, "c"`},
		{"across batches", []answer{more("b", "c"), complete("c0", "a")}, [][]string{{"b", "c"}}, `key "a" is not after the key before it, "c0"`},
		{"the first of a batch", []answer{more("b", "c"), complete("c")}, [][]string{{"b", "c"}}, `key "c" is not after the key before it, "c"`},
		{"across a restart", []answer{{keys: []string{"b", "c"}, err: restartError{}}, complete("c")}, [][]string{{"b", "c"}}, `key "c" is not after the key before it, "c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRequests{answers: map[uint16][]answer{0: tc.answers}}
			r := Start(t.Context(), rangeConfig("a", "z", 0), f)
			assert.Equal(t, tc.passed, drain(r))
			err, _, _ := r.Result()
			assert.ErrorIs(t, err, memdx.ErrMalformed)
			assert.ErrorContains(t, err, tc.refuse)
			log := f.Log()
			assert.Regexp(t, `^cancel 0#\d$`, log[len(log)-1], "the scan is cancelled on the server")
		})
	}
}

// A continue that says the vbucket's scan is to be made again (it moved)
// creates it again after the last key returned, cancelling the old one
// first when the node may still hold it; a restart that returned keys
// resets the count of restarts without progress.
func TestScanRestartsAfterTheLastKeyReturned(t *testing.T) {
	f := &fakeRequests{answers: map[uint16][]answer{0: {
		more("a", "b"),
		{err: restartError{cancel: true}},
		{keys: []string{"c"}, err: restartError{cancel: false}},
		complete("d"),
	}}}
	r := Start(t.Context(), rangeConfig("a", "z", 0), f)
	assert.Equal(t, [][]string{{"a", "b"}, {"c"}, {"d"}}, drain(r))
	err, done, _ := r.Result()
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, []string{
		"create 0 from a", "continue 0#1", "continue 0#1", "cancel 0#1",
		"create 0 after b", "continue 0#2",
		"create 0 after c", "continue 0#3",
	}, f.Log())
}

// A vbucket whose scan is made again maxRestarts times in a row without
// returning anything fails the scan with the last restart's error, naming
// the vbucket; a restart that returned keys starts the count again.
func TestScanGivesUpAfterRestartsWithoutProgress(t *testing.T) {
	answers := []answer{{err: restartError{}}, {keys: []string{"a"}, err: restartError{}}}
	for range maxRestarts {
		answers = append(answers, answer{err: restartError{}})
	}
	f := &fakeRequests{answers: map[uint16][]answer{5: answers}}
	r := Start(t.Context(), rangeConfig("a", "z", 5), f)
	assert.Equal(t, [][]string{{"a"}}, drain(r))
	err, done, _ := r.Result()
	assert.False(t, done)
	assert.ErrorAs(t, err, new(restartError))
	assert.ErrorContains(t, err, fmt.Sprintf("scan of vbucket 5 restarted %d times in a row without progress", maxRestarts),
		"the restarts it made, not the one it did not")
	assert.Equal(t, 2+maxRestarts, f.creates, "the first create, the restart after the one that returned a key, and maxRestarts more")
	assert.Empty(t, f.answers[5], "every restart was a create and a continue")
}

// A continue that fails for good (no restart) cancels the scan on the
// server and fails the whole scan with its error; the other vbuckets are
// not scanned.
func TestScanContinueFailureCancelsAndFails(t *testing.T) {
	boom := errors.New("server failure")
	f := &fakeRequests{answers: map[uint16][]answer{
		0: {more("a"), {keys: []string{"b"}, err: boom}},
		1: {complete("c")},
	}}
	r := Start(t.Context(), rangeConfig("a", "z", 0, 1), f)
	assert.Equal(t, [][]string{{"a"}, {"b"}}, drain(r), "what came before the failure is passed on")
	err, done, _ := r.Result()
	assert.ErrorIs(t, err, boom)
	assert.False(t, done)
	assert.Equal(t, []string{"create 0 from a", "continue 0#1", "continue 0#1", "cancel 0#1"}, f.Log())
}

// Stop ends a continue in flight (through its context) and cancels the
// scan on the server before it returns, with no error of its own; the
// scan is not complete.
func TestScanStopCancelsTheScanInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRequests{answers: map[uint16][]answer{3: {more("a"), {hold: true}}}}
		r := Start(t.Context(), rangeConfig("a", "z", 3), f)
		assert.Equal(t, []Item{{ID: "a", IDOnly: true}}, <-r.Out())
		synctest.Wait() // the second continue is in flight
		require.NoError(t, r.Stop())
		assert.Equal(t, []string{"create 3 from a", "continue 3#1", "continue 3#1", "cancel 3#1"}, f.Log())
		assert.Zero(t, r.Workers())
		err, done, cause := r.Result()
		assert.NoError(t, err)
		assert.False(t, done)
		assert.ErrorIs(t, cause, errStopped)
	})
}

// A continue in flight when the scan stops (Close, a loop broken early, a
// sampling scan at its Limit) is given up as its caller meant to: its
// context's cause wraps conn.ErrNotNeeded, so that its connection expects
// its late answer (no orphan, no stray warning). One the caller's context
// or a failure ended is not.
func TestScanStopMarksTheContinueInFlightNotNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRequests{answers: map[uint16][]answer{3: {more("a"), {hold: true}}}}
		r := Start(t.Context(), rangeConfig("a", "z", 3), f)
		<-r.Out()
		synctest.Wait() // the second continue is in flight
		require.NoError(t, r.Stop())
		require.Len(t, f.held, 1)
		assert.ErrorIs(t, f.held[0], conn.ErrNotNeeded)

		f = &fakeRequests{answers: map[uint16][]answer{3: {{hold: true}}}}
		ctx, cancel := context.WithCancel(t.Context())
		r = Start(ctx, rangeConfig("a", "z", 3), f)
		synctest.Wait()
		cancel()
		assert.Empty(t, drain(r))
		require.Len(t, f.held, 1)
		assert.NotErrorIs(t, f.held[0], conn.ErrNotNeeded, "the caller canceled")

		f = &fakeRequests{answers: map[uint16][]answer{3: {{hold: true}}}}
		r = Start(t.Context(), rangeConfig("a", "z", 3), f)
		synctest.Wait()
		r.Fail(errors.New("the client closed"))
		assert.Empty(t, drain(r))
		require.Len(t, f.held, 1)
		assert.NotErrorIs(t, f.held[0], conn.ErrNotNeeded, "a failure")
	})
}

// The scan's context ending while a create is in flight does not abandon
// the create (its scan's id would be lost): the scan waits for it, then
// cancels the scan it made. Result reports the context's cause.
func TestScanCancelsAScanCreatedAfterItStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := &fakeRequests{answers: map[uint16][]answer{4: {complete("a")}},
			createStarted: func(uint16) { <-release }}
		ctx, cancel := context.WithCancel(t.Context())
		r := Start(ctx, rangeConfig("a", "z", 4), f)
		synctest.Wait() // the create is in flight
		cancel()
		synctest.Wait()
		assert.Empty(t, f.Log(), "the create is not abandoned")
		close(release)
		assert.Empty(t, drain(r))
		assert.Equal(t, []string{"create 4 from a", "cancel 4#1"}, f.Log())
		err, done, cause := r.Result()
		assert.NoError(t, err)
		assert.False(t, done)
		assert.ErrorIs(t, cause, context.Canceled)
	})
}

// The scan's context reaching its deadline while a continue is in flight
// stops the scan (the server's scan is cancelled) with no error of its
// own: Result gives the deadline as the cause, for the caller to report
// the scan's timeout (client's ScanResult names the request then in
// flight). Time is synctest's fake clock.
func TestScanDeadlineIsTheResultsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRequests{answers: map[uint16][]answer{1: {{hold: true}}}}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		r := Start(ctx, rangeConfig("a", "z", 1), f)
		assert.Empty(t, drain(r))
		err, done, cause := r.Result()
		assert.NoError(t, err)
		assert.False(t, done)
		assert.ErrorIs(t, cause, context.DeadlineExceeded)
		assert.Equal(t, []string{"create 1 from a", "continue 1#1", "cancel 1#1"}, f.Log())
	})
}

// The scan runs ahead of a caller that takes nothing by at most two
// batches per worker: one queued in Out, one waiting to be. Then it waits.
func TestScanWaitsForTheCallerBeyondTwoBatchesPerWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRequests{answers: map[uint16][]answer{}}
		var vbs []uint16
		for vb := range uint16(8) {
			vbs = append(vbs, vb)
			f.answers[vb] = []answer{complete(fmt.Sprint("k", vb))}
		}
		cfg := rangeConfig("a", "z", vbs...)
		cfg.Concurrency = 2
		r := Start(t.Context(), cfg, f)
		synctest.Wait() // every worker is blocked: nothing takes the batches
		assert.Equal(t, 2, r.Queued())
		assert.Equal(t, 4, countPrefix(f.Log(), "continue"), "two batches queued, two waiting to be")
		got := drain(r)
		assert.Len(t, got, 8)
		err, done, _ := r.Result()
		assert.NoError(t, err)
		assert.True(t, done)
	})
}

// At most Concurrency vbuckets are scanned at once, each vbucket once,
// and the scan uses as many as it is allowed.
func TestScanRunsAtMostConcurrencyVbucketsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		f := &fakeRequests{answers: map[uint16][]answer{}}
		var vbs []uint16
		for vb := range uint16(10) {
			vbs = append(vbs, vb)
			f.answers[vb] = []answer{{keys: []string{"k"}, status: memdx.StatusRangeScanComplete, hold: true, release: gate}}
		}
		cfg := rangeConfig("a", "z", vbs...)
		cfg.Concurrency = 3
		r := Start(t.Context(), cfg, f)
		assert.Equal(t, 3, r.Workers())
		synctest.Wait()
		f.mu.Lock()
		assert.Equal(t, 3, f.inFlight, "three vbuckets are scanned at once")
		f.mu.Unlock()
		close(gate)
		assert.Len(t, drain(r), 10)
		assert.Equal(t, 3, f.maxInFlight)
		assert.Equal(t, 10, f.creates, "each vbucket is scanned once")
		err, done, _ := r.Result()
		assert.NoError(t, err)
		assert.True(t, done)
	})
}

func countPrefix(log []string, prefix string) int {
	n := 0
	for _, l := range log {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// A sampling scan skips, after a restart, the keys it returned before it
// (the new scan samples again, whole); within one create it refuses a key
// returned twice, and takes more keys than the samples asked for, which
// kv_engine's Bernoulli sampling may return (the Cursor stops at Limit).
func TestSamplingScan(t *testing.T) {
	sampling := func(samples uint64, answers ...answer) (*fakeRequests, *Run) {
		f := &fakeRequests{answers: map[uint16][]answer{0: answers}}
		cfg := Config{Sampling: &memdx.RangeScanSampling{Samples: samples, Seed: 1}, Limit: samples,
			ItemLimit: 10, Vbuckets: []uint16{0}, Concurrency: 1}
		return f, Start(t.Context(), cfg, f)
	}
	t.Run("restart", func(t *testing.T) {
		f, r := sampling(3, answer{keys: []string{"q", "b"}, err: restartError{}}, complete("b", "c", "q"))
		assert.Equal(t, [][]string{{"q", "b"}, {"c"}}, drain(r))
		err, done, _ := r.Result()
		require.NoError(t, err)
		assert.True(t, done)
		assert.Equal(t, []string{"create 0 start", "continue 0#1", "create 0 start", "continue 0#2"}, f.Log())
	})
	t.Run("a key twice", func(t *testing.T) {
		_, r := sampling(3, more("q"), complete("q"))
		assert.Equal(t, [][]string{{"q"}}, drain(r))
		err, _, _ := r.Result()
		assert.ErrorIs(t, err, memdx.ErrMalformed)
		assert.ErrorContains(t, err, `the sampling scan returned key "q" twice`)
	})
	t.Run("more keys than the samples", func(t *testing.T) {
		_, r := sampling(2, complete("q", "r", "s"))
		assert.Equal(t, [][]string{{"q", "r", "s"}}, drain(r))
		err, done, _ := r.Result()
		require.NoError(t, err)
		assert.True(t, done)
	})
}

// A continue's decoder keeps at most Max items: past it the continue
// fails (memdx.ErrMalformed), the items are dropped, and every packet
// after fails the same way, keeping nothing, so a server streaming
// without end does not fill memory. A failure status is left to the
// caller.
func TestDecoderKeepsAtMostTheItemLimit(t *testing.T) {
	d := Decoder{Max: 3}
	handled, err := d.Handle(keysPacket(memdx.StatusSuccess, "a", "b"))
	require.True(t, handled)
	require.NoError(t, err)
	handled, err = d.Handle(keysPacket(memdx.StatusSuccess, "c", "d"))
	assert.True(t, handled)
	assert.ErrorIs(t, err, memdx.ErrMalformed)
	assert.ErrorContains(t, err, "more than the 3 items asked for")
	assert.Nil(t, d.Items)
	_, again := d.Handle(keysPacket(memdx.StatusSuccess, "e"))
	assert.Same(t, err, again)
	assert.Nil(t, d.Items)

	docs := Decoder{Max: 1}
	var v []byte
	for _, k := range []string{"a", "b"} {
		v = memdx.AppendRangeScanDocument(v, &memdx.RangeScanDocument{Key: []byte(k), Value: []byte("{}")})
	}
	_, err = docs.Handle(&memdx.Packet{Status: memdx.StatusSuccess, Value: v,
		Extras: memdx.AppendRangeScanContent(nil, memdx.RangeScanDocuments)})
	assert.ErrorIs(t, err, memdx.ErrMalformed)
	assert.Nil(t, docs.Items)

	handled, err = (&Decoder{Max: 3}).Handle(keysPacket(memdx.StatusNotMyVbucket))
	assert.False(t, handled, "a failure status is the caller's to judge")
	assert.NoError(t, err)
}

// The item limit is an attempt's: a continue sent again (a new opaque)
// may bring Max items of its own, and the earlier attempt's stay.
func TestDecoderLimitsEachAttempt(t *testing.T) {
	d := Decoder{Max: 3}
	first := keysPacket(memdx.StatusSuccess, "a", "b")
	first.Opaque = 7
	handled, err := d.Handle(first)
	require.True(t, handled)
	require.NoError(t, err)
	refused := keysPacket(memdx.StatusTmpFail)
	refused.Opaque = 7
	handled, _ = d.Handle(refused)
	require.False(t, handled)
	again := keysPacket(memdx.StatusRangeScanMore, "c", "d", "e")
	again.Opaque = 8
	handled, err = d.Handle(again)
	require.True(t, handled)
	require.NoError(t, err, "three items are the second attempt's limit, whatever the first brought")
	require.Len(t, d.Items, 5)
	over := keysPacket(memdx.StatusRangeScanMore, "f")
	over.Opaque = 8
	_, err = d.Handle(over)
	assert.ErrorIs(t, err, memdx.ErrMalformed, "a fourth item of the second attempt")
}

// A continue's documents are decoded into items the caller owns: a copy
// of each value (the packet's buffer is the connection's), decompressed
// when snappy, an empty value (compressed or not) as an empty slice, flags,
// CAS and expiry.
func TestDecoderCopiesDocuments(t *testing.T) {
	compressed := memdx.CompressSnappy(nil, []byte(`{"big":"value"}`))
	var v []byte
	for _, doc := range []memdx.RangeScanDocument{
		{Key: []byte("a"), Value: []byte(`{"x":1}`), Flags: 0x02000006, Cas: 7, Expiry: 1700000000},
		{Key: []byte("b"), Value: compressed, Datatype: memdx.DatatypeSnappy | memdx.DatatypeJSON},
		{Key: []byte("c")},
		{Key: []byte("d"), Value: memdx.CompressSnappy(nil, nil), Datatype: memdx.DatatypeSnappy},
	} {
		v = memdx.AppendRangeScanDocument(v, &doc)
	}
	d := Decoder{Max: 10}
	handled, err := d.Handle(&memdx.Packet{Status: memdx.StatusRangeScanComplete, Value: v,
		Extras: memdx.AppendRangeScanContent(nil, memdx.RangeScanDocuments)})
	require.True(t, handled)
	require.NoError(t, err)
	clear(v) // the connection reuses its buffer
	require.Len(t, d.Items, 4)
	assert.Equal(t, Item{ID: "a", Value: []byte(`{"x":1}`), Flags: 0x02000006, Cas: 7, Expiry: d.Items[0].Expiry}, d.Items[0])
	assert.Equal(t, int64(1700000000), d.Items[0].Expiry.Unix())
	assert.Equal(t, []byte(`{"big":"value"}`), d.Items[1].Value)
	assert.NotNil(t, d.Items[2].Value, "an empty value is a value")
	assert.Empty(t, d.Items[2].Value)
	assert.True(t, d.Items[2].Expiry.IsZero())
	assert.NotNil(t, d.Items[3].Value, "an empty value sent compressed is a value")
	assert.Empty(t, d.Items[3].Value)
	assert.Equal(t, memdx.StatusRangeScanComplete, d.Status)
}

// A restart's create starts just after the last key returned, with the
// range's end and the vbucket's snapshot kept; a sampling scan's has no
// range.
func TestCreateConfig(t *testing.T) {
	c := Config{KeyOnly: true, Range: &memdx.RangeScanRange{Start: []byte("a"), End: []byte("m"), ExclusiveEnd: true},
		Snapshots: map[uint16]memdx.RangeScanSnapshot{2: {VbUUID: 9, Seqno: 11}}}
	first := c.CreateConfig(2, nil)
	assert.Equal(t, &memdx.RangeScanCreate{KeyOnly: true, Range: c.Range, Snapshot: &memdx.RangeScanSnapshot{VbUUID: 9, Seqno: 11}}, first)
	again := c.CreateConfig(3, []byte("f"))
	assert.Equal(t, &memdx.RangeScanRange{Start: []byte("f"), ExclusiveStart: true, End: []byte("m"), ExclusiveEnd: true}, again.Range)
	assert.Nil(t, again.Snapshot, "vbucket 3 has no snapshot to wait for")
	assert.Equal(t, []byte("a"), c.Range.Start, "the scan's own range is not changed")
}

// Order alternates between the vbuckets' active nodes, each vbucket once,
// so that concurrent vbucket scans spread over the nodes.
func TestOrderAlternatesBetweenNodes(t *testing.T) {
	cfg, err := vbmap.Parse([]byte(`{"rev":1,"name":"b","nodeLocator":"vbucket",
		"nodesExt":[{"hostname":"h1","services":{"kv":11210}},{"hostname":"h2","services":{"kv":11210}}],
		"vBucketServerMap":{"numReplicas":0,"serverList":["h1:11210","h2:11210"],
		"vBucketMap":[[0],[0],[0],[1],[1],[-1]]}}`), "h1")
	require.NoError(t, err)
	assert.Equal(t, []uint16{0, 3, 5, 1, 4, 2}, Order(cfg))
}
