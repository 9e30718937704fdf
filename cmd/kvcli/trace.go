package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/kvwire/kvwire/client"
)

// tracer is the -v observer: one line per attempt, on stderr, when the
// attempt ends.
type tracer struct {
	mu     sync.Mutex
	w      io.Writer
	redact func(string) string // for the values in a line (see invocation.redact)
}

func newTracer(w io.Writer, redact func(string) string) *tracer {
	return &tracer{w: w, redact: redact}
}

func (t *tracer) AttemptStart(client.AttemptInfo) {}

func (t *tracer) AttemptEnd(a client.AttemptInfo, err error) {
	line := formatAttempt(a, err, t.redact)
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(t.w, line)
}

// formatAttempt renders one attempt:
//
//	kvcli: Upsert "k" attempt 2 (retry: KV_LOCKED) -> 127.0.0.1:40001 vb 512 by current map (rev 7): LOCKED in 1.2ms
func formatAttempt(a client.AttemptInfo, err error, redact func(string) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kvcli: %s %q attempt %d", a.Op, redact(a.Key), a.Attempt+1)
	if a.Retry {
		fmt.Fprintf(&b, " (retry: %s)", a.RetryReason)
	}
	node := redact(a.Node)
	if node == "" {
		node = "(no node)"
	}
	switch {
	case a.ConfigRev == 0: // memcached: no config, ketama
		fmt.Fprintf(&b, " -> %s by ketama: ", node)
	case a.ForwardMap:
		fmt.Fprintf(&b, " -> %s vb %d by forward map (rev %d): ", node, a.Vbucket, a.ConfigRev)
	default:
		fmt.Fprintf(&b, " -> %s vb %d by current map (rev %d): ", node, a.Vbucket, a.ConfigRev)
	}
	switch {
	case a.Status != 0:
		b.WriteString(a.Status.String())
	case err != nil:
		b.WriteString("error: " + redact(err.Error()))
	default:
		b.WriteString("SUCCESS")
	}
	b.WriteString(" in " + fmtDuration(a.Duration))
	return b.String()
}
