package reftest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Server durations (HELLO Tracing): the official clients negotiate Tracing
// against the mock and report the server durations it sends. The mock
// times a request in real time from when it takes it up until its answer
// is released, so an injected delay is part of the duration: what a client
// reports must be at least the delay and at most the round trip the test
// measured around the operation (the 2-byte encoding moves a duration of
// these magnitudes by under 0.2%).

const durationPrecision = 0.002

// withinServerDuration reports whether d is a server duration the mock can
// have sent for an operation it held for delay, answered within rtt.
func withinServerDuration(d, delay, rtt time.Duration) bool {
	return float64(d) >= float64(delay)*(1-durationPrecision) && float64(d) <= float64(rtt)*(1+durationPrecision)
}

// spanRecorder is a gocbcore.RequestTracer keeping every ended span.
type spanRecorder struct {
	mu    sync.Mutex
	ended []*recordedSpan
}

type recordedSpan struct {
	rec   *spanRecorder
	name  string
	mu    sync.Mutex
	attrs map[string]any
}

func (r *spanRecorder) RequestSpan(_ gocbcore.RequestSpanContext, name string) gocbcore.RequestSpan {
	return &recordedSpan{rec: r, name: name, attrs: map[string]any{}}
}

func (r *spanRecorder) reset() {
	r.mu.Lock()
	r.ended = nil
	r.mu.Unlock()
}

// serverDurations returns the server-duration attribute of every ended
// dispatch span.
func (r *spanRecorder) serverDurations() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, s := range r.ended {
		s.mu.Lock()
		d, ok := s.attrs["db.couchbase.server_duration"].(time.Duration)
		s.mu.Unlock()
		if s.name == "dispatch_to_server" && ok {
			out = append(out, d)
		}
	}
	return out
}

func (s *recordedSpan) End() {
	s.rec.mu.Lock()
	s.rec.ended = append(s.rec.ended, s)
	s.rec.mu.Unlock()
}

// Context is the span itself: gocbcore starts its command and dispatch spans
// only under a non-nil context.
func (s *recordedSpan) Context() gocbcore.RequestSpanContext { return s }
func (s *recordedSpan) AddEvent(string, time.Time)           {}
func (s *recordedSpan) SetAttribute(key string, value any) {
	s.mu.Lock()
	s.attrs[key] = value
	s.mu.Unlock()
}

// logCapture is a gocbcore.Logger sending each warning to a channel.
type logCapture struct{ lines chan string }

func (l logCapture) Log(level gocbcore.LogLevel, _ int, format string, v ...any) error {
	if level <= gocbcore.LogWarn {
		select {
		case l.lines <- fmt.Sprintf(format, v...):
		default:
		}
	}
	return nil
}

// gocbcoreLogs is the one gocbcore.Logger of the test binary, installed by
// TestMain before any agent runs: gocbcore.SetLogger writes a global its
// goroutines read without synchronisation, and an agent's goroutines may
// still log after Close returns, so a test swaps this logger's sink
// (capture) instead of calling SetLogger.
var gocbcoreLogs logSwitch

// logSwitch forwards gocbcore's log lines to the sink a test set, if any.
type logSwitch struct{ sink atomic.Pointer[logCapture] }

func (l *logSwitch) Log(level gocbcore.LogLevel, offset int, format string, v ...any) error {
	if s := l.sink.Load(); s != nil {
		return s.Log(level, offset, format, v...)
	}
	return nil
}

// capture sends gocbcore's warnings to logs until the test ends.
func (l *logSwitch) capture(t *testing.T, logs logCapture) {
	l.sink.Store(&logs)
	t.Cleanup(func() { l.sink.Store(nil) })
}

// orphanReport is the JSON both SDKs log for orphaned responses (RFC 0067).
type orphanReport struct {
	KV struct {
		Count int `json:"total_count"`
		Top   []struct {
			Operation         string `json:"operation_name"`
			LastServerMicros  uint64 `json:"last_server_duration_us"`
			TotalMicros       uint64 `json:"total_duration_us"`
			LastRemoteSocket  string `json:"last_remote_socket"`
			LastLocalSocket   string `json:"last_local_socket"`
			LastLocalID       string `json:"last_local_id"`
			OperationIDString any    `json:"operation_id"`
		} `json:"top_requests"`
	} `json:"kv"`
}

// gocbcore with UseDurations negotiates Tracing; the dispatch span of each
// KV operation carries the server duration the mock sent, and a response
// that arrives after its operation timed out is in gocbcore's orphan
// report with that duration.
func TestGocbcoreSeesServerDurations(t *testing.T) {
	const delay = 200 * time.Millisecond
	c, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	logs := logCapture{lines: make(chan string, 64)}
	gocbcoreLogs.capture(t, logs)
	tracer := &spanRecorder{}
	agent := newAgent(t, c, func(cfg *gocbcore.AgentConfig) {
		cfg.IoConfig.UseDurations = true
		cfg.TracerConfig.Tracer = tracer
		cfg.OrphanReporterConfig = gocbcore.OrphanReporterConfig{Enabled: true, ReportInterval: 100 * time.Millisecond, SampleSize: 10}
	})
	key := []byte("gocbcore-slow")
	if _, err := c.Bucket(mockcluster.DefaultBucket).Set("", "", string(key), []byte(`{"n":1}`), 0, 0); err != nil {
		t.Fatal(err)
	}

	// An undelayed Get: a server duration is there, and small.
	tracer.reset()
	if _, err := call(t, func(cb func(*gocbcore.GetResult, error)) (gocbcore.PendingOp, error) {
		return agent.Get(gocbcore.GetOptions{Key: key, Deadline: deadline()}, cb)
	}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if ds := tracer.serverDurations(); len(ds) != 1 || ds[0] >= delay {
		t.Fatalf("undelayed Get: dispatch spans' server durations %v, want one under %v (is Tracing negotiated?)", ds, delay)
	}

	// A Get the mock holds for delay.
	h := c.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: string(key)},
		Action: mockcluster.Action{Delay: delay}, Times: 1})
	tracer.reset()
	start := time.Now()
	if _, err := call(t, func(cb func(*gocbcore.GetResult, error)) (gocbcore.PendingOp, error) {
		return agent.Get(gocbcore.GetOptions{Key: key, Deadline: deadline()}, cb)
	}); err != nil {
		t.Fatalf("delayed Get: %v", err)
	}
	rtt := time.Since(start)
	<-h.Done()
	ds := tracer.serverDurations()
	if len(ds) != 1 || !withinServerDuration(ds[0], delay, rtt) {
		t.Fatalf("delayed Get: server durations %v, want one of at least %v and at most the %v round trip", ds, delay, rtt)
	}
	t.Logf("gocbcore's dispatch span: server duration %v for a %v delay (round trip %v)", ds[0], delay, rtt)

	// A Get that times out before the mock answers: the late answer is an
	// orphan, reported with its server duration.
	h = c.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: string(key)},
		Action: mockcluster.Action{Delay: delay}, Times: 1})
	start = time.Now()
	_, err = call(t, func(cb func(*gocbcore.GetResult, error)) (gocbcore.PendingOp, error) {
		return agent.Get(gocbcore.GetOptions{Key: key, Deadline: time.Now().Add(delay / 4)}, cb)
	})
	if !errors.Is(err, gocbcore.ErrTimeout) {
		t.Fatalf("Get with a deadline before the mock answers: %v, want a timeout", err)
	}
	<-h.Done()
	rep := awaitOrphanReport(t, logs.lines, "Orphaned responses observed:", 2*opTimeout)
	bound := time.Since(start)
	if rep.KV.Count != 1 || len(rep.KV.Top) != 1 {
		t.Fatalf("orphan report %+v, want the one timed-out Get", rep)
	}
	got := rep.KV.Top[0]
	if d := time.Duration(got.LastServerMicros) * time.Microsecond; !withinServerDuration(d, delay, bound) {
		t.Fatalf("orphan %+v: last_server_duration_us %v, want at least %v and at most %v", got, d, delay, bound)
	}
	t.Logf("gocbcore's orphan report: %+v", got)
}

// awaitOrphanReport waits for a log line starting with prefix and decodes
// the JSON after it.
func awaitOrphanReport(t *testing.T, lines <-chan string, prefix string, limit time.Duration) orphanReport {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case l := <-lines:
			i := strings.Index(l, prefix)
			if i < 0 {
				continue
			}
			var rep orphanReport
			if err := json.Unmarshal([]byte(strings.TrimSpace(l[i+len(prefix):])), &rep); err != nil {
				t.Fatalf("orphan report %q: %v", l, err)
			}
			return rep
		case <-timer.C:
			t.Fatalf("no %q log line within %v", prefix, limit)
		}
	}
}

// observeConfig is what node/observe.js takes.
type observeConfig struct {
	nodeConfig
	ThresholdMs    int `json:"thresholdMs"`
	EmitMs         int `json:"emitMs"`
	ShortTimeoutMs int `json:"shortTimeoutMs"`
}

// observeLine is a line node/observe.js prints: its result, or a threshold
// report the SDK logged (RFC 0067's format).
type observeLine struct {
	Result *struct {
		SlowGetMicros int64  `json:"slowGetMicros"`
		TimedOut      bool   `json:"timedOut"`
		TimeoutError  string `json:"timeoutError"`
	} `json:"result"`
	Threshold *struct {
		KV *struct {
			Count int `json:"total_count"`
			Top   []struct {
				// The SDK reports durations in microseconds with
				// fractions.
				Operation        string  `json:"operation_name"`
				TotalMicros      float64 `json:"total_duration_us"`
				LastServerMicros float64 `json:"last_server_duration_us"`
				LastRemoteSocket string  `json:"last_remote_socket"`
				LastLocalID      string  `json:"last_local_id"`
				OperationID      string  `json:"operation_id"`
			} `json:"top_requests"`
		} `json:"kv"`
	} `json:"threshold"`
}

// reportLimit bounds the wait for a report the SDK emits every EmitMs: far
// more than a healthy run needs, it only turns a missing report into a
// failure that says so.
const reportLimit = time.Minute

// The Node.js SDK's C++ core asks for HELLO Tracing and hands the server
// durations the mock sends to the SDK's spans: its threshold-logging
// tracer reports a Get the mock held past the KV threshold with the held
// time as its last_server_duration_us. The orphan reporter (the C++
// core's) reports the Get that timed out; it records an orphan when the
// timeout fires, before any answer, so that entry's server duration is 0
// in the SDK itself: the test checks its other fields (the slow get's
// remote socket and local id, an operation id of its own, a loopback local
// socket, a total of at least the timeout).
func TestNodeSDKSeesServerDurations(t *testing.T) {
	script := nodeScript(t, "observe.js")
	const delay = 300 * time.Millisecond
	c := nodeCluster(t, mockcluster.Options{})
	if _, err := c.Bucket(mockcluster.DefaultBucket).Set("app", "items", "slow", []byte(`{"n":1}`), 0, 0); err != nil {
		t.Fatal(err)
	}
	h := c.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "slow"},
		Action: mockcluster.Action{Delay: delay}, Times: 2})
	defer h.Remove()
	cfg := observeConfig{nodeConfig: baseConfig(t, c, false), ThresholdMs: 100, EmitMs: 200, ShortTimeoutMs: 100}
	cfg.ConnStr = strings.Replace(cfg.ConnStr, "enable_tracing=false", "enable_tracing=true", 1)
	cfg.ReadKeys = []string{"slow"}

	run := startObserved(t, script, cfg)
	// The result and the threshold report come in either order: the
	// report of the slow get may be emitted before the second get times
	// out.
	var rtt time.Duration
	type entry struct {
		total, server   time.Duration
		remote, localID string
		operationID     string
	}
	var slow *entry
	run.await(t, run.stdout, "result line and threshold report with the delayed get", func(l string) bool {
		var line observeLine
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("observe.js printed %q: %v", l, err)
		}
		switch {
		case line.Result != nil:
			if !line.Result.TimedOut {
				t.Fatalf("the Get with a %d ms timeout against a %v delay did not time out: %s", cfg.ShortTimeoutMs, delay, l)
			}
			rtt = time.Duration(line.Result.SlowGetMicros) * time.Microsecond
		case line.Threshold != nil && line.Threshold.KV != nil:
			for _, e := range line.Threshold.KV.Top {
				total := time.Duration(e.TotalMicros * float64(time.Microsecond))
				if e.Operation == "get" && total >= delay {
					slow = &entry{total, time.Duration(e.LastServerMicros * float64(time.Microsecond)),
						e.LastRemoteSocket, e.LastLocalID, e.OperationID}
					t.Logf("SDK's threshold report: %+v", e)
				}
			}
		}
		return rtt > 0 && slow != nil
	})
	if bound := min(rtt, slow.total); !withinServerDuration(slow.server, delay, bound) {
		t.Errorf("threshold report: last_server_duration_us %v, want at least the %v delay and at most the operation's %v", slow.server, delay, bound)
	}
	run.await(t, run.stderr, "C++ core's orphan report", func(l string) bool {
		const prefix = "Orphan responses observed:"
		i := strings.Index(l, prefix)
		if i < 0 {
			return false
		}
		var rep orphanReport
		if err := json.Unmarshal([]byte(strings.TrimSpace(l[i+len(prefix):])), &rep); err != nil {
			t.Fatalf("orphan report %q: %v", l, err)
		}
		if rep.KV.Count != 1 || len(rep.KV.Top) != 1 || rep.KV.Top[0].Operation != "get" {
			t.Fatalf("orphan report %q, want the one timed-out get", l)
		}
		// The same key on the same connection as the slow get, a request
		// of its own, from the dispatch to the timeout at least.
		o := rep.KV.Top[0]
		opID, _ := o.OperationIDString.(string)
		if o.LastRemoteSocket != slow.remote || o.LastLocalID != slow.localID || !strings.HasPrefix(opID, "0x") || opID == slow.operationID ||
			!strings.HasPrefix(o.LastLocalSocket, "127.0.0.1:") || time.Duration(o.TotalMicros)*time.Microsecond < time.Duration(cfg.ShortTimeoutMs)*time.Millisecond {
			t.Fatalf("orphan report %q: want the slow get's remote socket %s and local id %s, an operation id of its own (not %s), a loopback local socket, a total of at least the %d ms timeout",
				l, slow.remote, slow.localID, slow.operationID, cfg.ShortTimeoutMs)
		}
		t.Logf("C++ core's orphan report: %s", l[i+len(prefix):])
		return true
	})
	run.finish(t)
	<-h.Done()
}

// observed is a running node/observe.js whose stdout and stderr lines
// arrive on channels.
type observed struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *lineStream
}

// lineStream is one output of the script, read line by line by a goroutine.
type lineStream struct {
	name  string
	lines chan string
	done  chan struct{} // closed when the stream has been read to its end
	mu    sync.Mutex
	tail  *tailBuffer // guarded by mu
}

func (s *lineStream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tail.String()
}

func readLines(name string, r io.Reader) *lineStream {
	s := &lineStream{name: name, lines: make(chan string, 1024), done: make(chan struct{}), tail: &tailBuffer{max: maxNodeStderr}}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxNodeLine)
		for sc.Scan() {
			l := sc.Text()
			s.mu.Lock()
			_, _ = s.tail.Write([]byte(l + "\n"))
			s.mu.Unlock()
			select {
			case s.lines <- l:
			default: // the test reads what it needs; the tail keeps the rest
			}
		}
	}()
	return s
}

func startObserved(t *testing.T, script string, cfg any) *observed {
	t.Helper()
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunLimit)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "node", script, string(arg))
	cmd.Dir = filepath.Dir(script)
	// The C++ core logs its orphan report at warning level to stderr.
	cmd.Env = append(os.Environ(), "COUCHBASE_LOG_LEVEL=off", "CBPPLOGLEVEL=warn")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &observed{cmd: cmd, stdin: stdin, stdout: readLines("stdout", outPipe), stderr: readLines("stderr", errPipe)}
	// Whatever happens, the process ends and is waited for, after both
	// outputs were read to their end, before the test returns.
	t.Cleanup(func() {
		_ = r.stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		<-r.stdout.done
		<-r.stderr.done
		_ = cmd.Wait()
	})
	return r
}

// await reads s's lines until accept takes one, failing the test when the
// script ends first or reportLimit passes.
func (r *observed) await(t *testing.T, s *lineStream, what string, accept func(line string) bool) {
	t.Helper()
	limit := time.NewTimer(reportLimit)
	defer limit.Stop()
	for {
		select {
		case l := <-s.lines:
			if accept(l) {
				return
			}
			continue
		case <-s.done:
		case <-limit.C:
		}
		t.Fatalf("observe.js gave no %s on %s (within %v)\nstdout:\n%s\nstderr:\n%s", what, s.name, reportLimit, r.stdout, r.stderr)
	}
}

// finish closes the script's stdin and checks that it exits cleanly.
func (r *observed) finish(t *testing.T) {
	t.Helper()
	_ = r.stdin.Close()
	<-r.stdout.done
	<-r.stderr.done
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("observe.js: %v\nstderr:\n%s", err, r.stderr)
	}
}
