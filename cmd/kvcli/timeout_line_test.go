package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/client"
)

// A timeout's line says what the node answered when it answered: "waiting
// for NODE to answer" of an operation whose node answered LOCKED (and
// whose retry's wait ran into the deadline) would send the user looking
// for a node that was fine.
func TestTimeoutLineSaysWhatTheNodeAnswered(t *testing.T) {
	inv := &invocation{env: &env_{getenv: func(string) string { return "" }}, opTimeout: 2500 * time.Millisecond}
	kv := &client.KeyValueError{Op: "Upsert", Key: "k", Node: "h:11210", Vbucket: 7, Status: client.StatusLocked,
		Err: client.ErrUnambiguousTimeout, Cause: timeoutCause}
	p := inv.explain("k", kv)
	assert.Equal(t, kindTimeout, p.kind)
	assert.NotContains(t, p.line, "waiting for", "the node answered: %s", p.line)
	assert.Contains(t, p.line, "LOCKED", p.line)

	// Nothing answered: the line waits for the node.
	kv = &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Vbucket: 7,
		Err: client.ErrUnambiguousTimeout, Cause: timeoutCause}
	p = inv.explain("k", kv)
	assert.Contains(t, p.line, "waiting for h:11210 to answer (vbucket 7)", p.line)
}

// timeoutCause matches what a client timeout's cause matches.
var timeoutCause = fmt.Errorf("%w: %w", client.ErrUnambiguousTimeout, client.ErrTimeout)
