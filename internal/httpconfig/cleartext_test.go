package httpconfig

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/mockcluster"
)

// records is a slog handler keeping every record as a line: its level,
// message and attributes.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// cleartextWarnings are the lines warning that the password went out in
// clear.
func (h *records) cleartextWarnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if strings.HasPrefix(l, "WARN ") && strings.Contains(l, "in clear") {
			out = append(out, l)
		}
	}
	return out
}

// The KV connections never send the password in clear without TLS (SCRAM;
// PLAIN only with TLS or AllowPlainAuthWithoutTLS), but a request to the
// cluster manager's REST port carries it in HTTP Basic auth, and without
// TLS that is the password in clear on the network. A client whose
// requests do so says it once, with what avoids it; none with TLS or
// without credentials.
func TestBasicAuthWithoutTLSIsWarnedOfOncePerClient(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, TLS: true})
	fetch := func(t *testing.T, cfg Config, addr string, times int) []string {
		t.Helper()
		h := &records{}
		cfg.Bucket, cfg.Logger = "default", slog.New(h)
		c := New(cfg)
		for range times {
			if _, _, err := c.Fetch(context.Background(), addr); err != nil {
				t.Fatal(err)
			}
		}
		return h.cleartextWarnings()
	}

	for range 2 { // each client warns, once
		w := fetch(t, Config{Username: "app", Password: "secret"}, mc.MgmtAddrs()[0], 3)
		if len(w) != 1 {
			t.Fatalf("%d warnings of the password in clear over three requests, want 1: %q", len(w), w)
		}
		for _, want := range []string{mc.MgmtAddrs()[0], "couchbases://"} {
			if !strings.Contains(w[0], want) {
				t.Errorf("warning %q does not say %q", w[0], want)
			}
		}
		if strings.Contains(w[0], "secret") {
			t.Errorf("warning %q holds the password", w[0])
		}
	}
	if w := fetch(t, Config{Username: "app", Password: "secret", TLS: &tls.Config{RootCAs: mc.RootCAs()}}, mc.MgmtTLSAddrs()[0], 1); len(w) != 0 {
		t.Errorf("warned over HTTPS: %q", w)
	}
	// Without credentials nothing is sent (the mock answers 401: no
	// Fetch error check here).
	h := &records{}
	c := New(Config{Bucket: "default", Logger: slog.New(h)})
	_, _, _ = c.Fetch(context.Background(), mc.MgmtAddrs()[0])
	if w := h.cleartextWarnings(); len(w) != 0 {
		t.Errorf("warned without credentials: %q", w)
	}
}

// echoNode answers every request with status and a body made by body
// from the request's Authorization header (a proxy's error page that
// quotes the request, say).
func echoNode(t *testing.T, status int, body func(auth string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body(r.Header.Get("Authorization")))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// An error answer's body is quoted in the error (and so in the logs of
// a stream that fails): one that quotes the request's credentials, their
// Basic auth token or the password itself, whole or cut by the part of
// the body read, has them masked there.
func TestErrorAnswerQuotingTheCredentialsHasThemMasked(t *testing.T) {
	const user, pass = "app", "s3cret-Pa55word"
	token := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	for _, tc := range []struct {
		name string
		body func(auth string) string
		want string // what the error still shows of the body
	}{
		{"header echoed", func(auth string) string { return "bad request: Authorization: " + auth + " not allowed here" },
			"bad request: Authorization: Basic [masked] not allowed here"},
		{"password echoed", func(string) string { return "user " + user + " with password " + pass + " refused" },
			"user app with password [masked] refused"},
		{"token across the end of the part shown", func(auth string) string { return strings.Repeat("x", 190) + auth },
			strings.Repeat("x", 190) + "Basic " + masked},
		{"password cut where the body ends", func(string) string { return strings.Repeat("x", 100) + pass[:8] },
			strings.Repeat("x", 100)},
		{"password cut where the part read ends", func(auth string) string { return auth + strings.Repeat("x", 180) + pass },
			"Basic " + masked + strings.Repeat("x", 180)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := echoNode(t, http.StatusBadRequest, tc.body)
			c := New(Config{Bucket: "default", Username: user, Password: pass})
			_, _, err := c.Fetch(context.Background(), addr)
			var he *Error
			if !errors.As(err, &he) || he.Status != http.StatusBadRequest {
				t.Fatalf("err %v, want an HTTP 400 *Error", err)
			}
			if he.Body != tc.want {
				t.Errorf("body %q, want %q", he.Body, tc.want)
			}
			for _, secret := range []string{pass, token, pass[:6], token[:20]} {
				if strings.Contains(err.Error(), secret) || strings.Contains(he.Body, secret) {
					t.Errorf("error %q holds %q", err, secret)
				}
			}
		})
	}
}

// A redirect (to a server of its own here; hostile_test.go's
// TestRedirectIsNotFollowed, to one named by a raw answer, and for Stream
// too) is not followed: the credentials go to the node asked and to
// no address an answer names (net/http's Client would follow it, with
// the Authorization header to the same host). The redirect is the
// request's failure, naming its status.
func TestRedirectOfABasicAuthRequestIsNotFollowed(t *testing.T) {
	var got atomic.Int32 // requests to the address the redirects name
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(other.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, status)
		}))
		t.Cleanup(srv.Close)
		c := New(Config{Bucket: "default", Username: "app", Password: "secret"})
		_, _, err := c.Fetch(context.Background(), srv.Listener.Addr().String())
		var he *Error
		if !errors.As(err, &he) || he.Status != status {
			t.Fatalf("err %v, want the HTTP %d as an *Error", err, status)
		}
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("%d requests reached the address the redirects named", n)
	}
}

// blockingWarn is a slog handler whose first WARN record waits, inside
// Handle, until release is closed: a Logger writing to a slow sink.
type blockingWarn struct {
	once             sync.Once
	entered, release chan struct{}
}

func (h *blockingWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.once.Do(func() { close(h.entered); <-h.release })
	}
	return nil
}
func (h *blockingWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *blockingWarn) WithGroup(string) slog.Handler      { return h }

// The cleartext warning is logged under no lock: while the Logger takes
// its time with it, the client's other requests run (a sync.Once held
// them all at its Do until the warning was written).
func TestCleartextWarningHoldsNoOtherRequest(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addr := mc.MgmtAddrs()[0]
	h := &blockingWarn{entered: make(chan struct{}), release: make(chan struct{})}
	c := New(Config{Bucket: "default", Username: "app", Password: "secret", Logger: slog.New(h)})
	first := make(chan error, 1)
	go func() { _, _, err := c.Fetch(context.Background(), addr); first <- err }()
	<-h.entered // the first request is logging the warning
	second := make(chan error, 1)
	go func() { _, _, err := c.Fetch(context.Background(), addr); second <- err }()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("second request: %v", err)
		}
	case <-time.After(guard): // only a failure's bound
		t.Errorf("the second request waited %v for the first's warning to be logged", guard)
		defer func() { <-second }()
	}
	close(h.release)
	// Nor did the Logger's time count against the request's own.
	if err := <-first; err != nil {
		t.Errorf("first request: %v", err)
	}
}

// A redirect's Location, quoted in the error (Error.Location), has the
// request's credentials masked as an error answer's body has: a proxy
// that echoes them into the address it redirects to does not put the
// password into the client's errors and logs.
func TestRedirectLocationQuotingTheCredentialsHasThemMasked(t *testing.T) {
	const user, pass = "app", "s3cret-Pa55word"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "https://elsewhere.example/login?user="+user+"&password="+pass)
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	c := New(Config{Bucket: "default", Username: user, Password: pass})
	_, _, err := c.Fetch(context.Background(), srv.Listener.Addr().String())
	var he *Error
	if !errors.As(err, &he) || he.Status != http.StatusFound {
		t.Fatalf("err %v, want the HTTP 302 as an *Error", err)
	}
	if strings.Contains(err.Error(), pass) || strings.Contains(he.Location, pass) {
		t.Fatalf("the password is in the error: %v", err)
	}
	if !strings.Contains(he.Location, "elsewhere.example") {
		t.Fatalf("Location %q: want where it pointed, the password masked", he.Location)
	}
}
