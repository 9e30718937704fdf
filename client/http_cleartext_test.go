package client

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// cleartextLog is a slog handler counting the warnings that the password
// went to the cluster manager in clear.
type cleartextLog struct {
	mu    sync.Mutex
	warns []string
}

func (h *cleartextLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *cleartextLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "in clear") {
		h.mu.Lock()
		h.warns = append(h.warns, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *cleartextLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *cleartextLog) WithGroup(string) slog.Handler      { return h }

func (h *cleartextLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.warns)
}

// A client whose configs come from the cluster manager over plain HTTP
// (couchbase://, bootstrap_on=http) sends the password in HTTP Basic
// auth, in clear: it says so once, though the first config's request and
// the stream's both carry it. A client whose configs come from the KV
// service (SCRAM) sends no REST request and says nothing.
func TestClientWarnsOnceOfThePasswordInClearToTheClusterManager(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})

	h := &cleartextLog{}
	_, err := connectString(t, mc.HTTPConnString()+"/"+mockcluster.DefaultBucket+"?bootstrap_on=http",
		&Options{Logger: slog.New(h)})
	require.NoError(t, err)
	// The stream's request is counted by the mock once received: its
	// warning, if any, came before.
	for wait := time.After(10 * time.Second); mc.RESTRequestCount("/pools/default/bs/default") == 0; {
		select {
		case <-wait:
			t.Fatal("the client opened no config stream")
		case <-time.After(time.Millisecond):
		}
	}
	require.Equal(t, 1, h.count(), "warnings of the password in clear: %q", h.warns)

	kv := &cleartextLog{}
	c := connect(t, mc, &Options{Logger: slog.New(kv)})
	_, err = c.DefaultCollection().Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
	require.Zero(t, kv.count(), "configs from the KV service: %q", kv.warns)
}
