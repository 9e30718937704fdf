package httpconfig

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"sync"
	"testing"

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
