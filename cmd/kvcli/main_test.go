package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/mockcluster"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvcli-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	defer os.RemoveAll(dir)
	leakcheck.Main(m)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// kvcliBinary builds the kvcli binary once per test run (only for the
// tests that need it) and returns its path.
func kvcliBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		p := filepath.Join(binDir, "kvcli")
		cmd := exec.Command("go", "build", "-o", p, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
			return
		}
		binPath = p
	})
	require.NoError(t, buildErr, "go build: %s", binPath)
	return binPath
}

// result is one kvcli run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// runKV runs kvcli in-process with exactly the environment env (nothing
// from the test's own environment) and stdin.
func runKV(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return runKVCtx(context.Background(), env, stdin, args...)
}

func runKVCtx(ctx context.Context, env map[string]string, stdin string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(ctx, args, &env_{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string { return env[k] },
	})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// env_ is the package's env type under a name that does not clash with
// the tests' env maps.
type env_ = env

// background runs kvcli with args under ctx on another goroutine, for
// tests that interrupt it (cancel ctx, as Ctrl-C does): done receives the
// exit code; stdout and stderr can be read while it runs.
type background struct {
	done           chan int
	stdout, stderr syncBuffer
}

func startKvcli(ctx context.Context, args []string, env map[string]string) *background {
	return startKvcliWith(ctx, args, env, nil)
}

// startKvcliWith is startKvcli with hook changing kvcli's environment
// (its ticker, what it takes for a terminal) before it runs.
func startKvcliWith(ctx context.Context, args []string, env map[string]string, hook func(*env_)) *background {
	bg := &background{done: make(chan int, 1)}
	e := &env_{
		stdin: strings.NewReader(""), stdout: &bg.stdout, stderr: &bg.stderr,
		getenv: func(k string) string { return env[k] },
	}
	if hook != nil {
		hook(e)
	}
	go func() { bg.done <- run(ctx, args, e) }()
	return bg
}

// manualTicker is a ticker the test fires.
type manualTicker struct {
	c       chan time.Time
	stopped chan struct{}
	once    sync.Once
}

func (m *manualTicker) C() <-chan time.Time { return m.c }
func (m *manualTicker) Stop()               { m.once.Do(func() { close(m.stopped) }) }

// tickers hands out manualTickers and records the period each was asked
// for: a test receives them from made, in the order kvcli made them.
type tickers struct {
	made    chan *manualTicker
	periods chan time.Duration
}

func newTickers() *tickers {
	return &tickers{made: make(chan *manualTicker, 16), periods: make(chan time.Duration, 16)}
}

func (ts *tickers) newTicker(d time.Duration) ticker {
	m := &manualTicker{c: make(chan time.Time), stopped: make(chan struct{})}
	ts.periods <- d
	ts.made <- m
	return m
}

// tick fires m once at now; false when m was stopped first.
func (m *manualTicker) tick(now time.Time) bool {
	select {
	case m.c <- now:
		return true
	case <-m.stopped:
		return false
	}
}

// newMock starts a mock cluster and returns it with the environment that
// points kvcli at it.
func newMock(t *testing.T, o mockcluster.Options) (*mockcluster.Cluster, map[string]string) {
	t.Helper()
	mc, err := mockcluster.New(o)
	require.NoError(t, err)
	t.Cleanup(mc.Close)
	return mc, map[string]string{
		envConnStr:  mc.ConnString() + "/" + mockcluster.DefaultBucket,
		envUser:     mockcluster.DefaultUser,
		envPassword: mockcluster.DefaultPassword,
	}
}

func with(env map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(env)+len(kv)/2)
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
