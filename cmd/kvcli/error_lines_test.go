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
		Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p := inv.explain("k", kv)
	assert.Equal(t, kindTimeout, p.kind)
	assert.NotContains(t, p.line, "waiting for", "the node answered: %s", p.line)
	assert.Contains(t, p.line, "LOCKED", p.line)

	// Nothing answered: the line waits for the node.
	kv = &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Vbucket: 7,
		Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p = inv.explain("k", kv)
	assert.Contains(t, p.line, "waiting for h:11210 to answer (vbucket 7)", p.line)
}

// lock's TMPFAILs retried as KV_TEMPORARY_FAILURE come on a connection
// with XERROR, where a lock is LOCKED: the line says the server was busy,
// not that the document may have stayed locked (it used to, on every
// connection). Without XERROR kvwire retries GET_LOCKED's TMPFAIL as
// KV_LOCKED: the line says the document stayed locked, and does not call
// the last TMPFAIL an answer no retry was made for.
func TestTimeoutLineOfGetAndLockTmpFail(t *testing.T) {
	inv := &invocation{env: &env_{getenv: func(string) string { return "" }}, opTimeout: 2500 * time.Millisecond}
	kv := &client.KeyValueError{Op: "GetAndLock", Key: "k", OpCode: client.OpCode(0x94), Node: "h:11210", Status: client.StatusTmpFail,
		RetryAttempts: 9, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVTemporaryFailure),
		StatusReason: client.RetryReasonKVTemporaryFailure,
		Err:          client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p := inv.explain("k", kv)
	assert.Contains(t, p.line, "retried 9 times for KV_TEMPORARY_FAILURE: the server kept answering TMPFAIL (busy", p.line)
	assert.NotContains(t, p.line, "locked", p.line)

	kv.RetryReasons = client.RetryReasons(0).With(client.RetryReasonKVLocked)
	kv.StatusReason = client.RetryReasonKVLocked // the client's status policy reads the TMPFAIL as a lock
	p = inv.explain("k", kv)
	assert.Contains(t, p.line, "retried 9 times for KV_LOCKED: the document stayed locked", p.line)
	assert.NotContains(t, p.line, "answered ETMPFAIL last", p.line)
}

// Without XERROR the client also retries as KV_LOCKED the TMPFAIL of a
// sub-document command given no CAS and of DELETE given one (kv_engine's
// answer for a locked document): a timeout after such retries did not
// get an answer no retry was made for. Another opcode's TMPFAIL after
// KV_LOCKED retries is still its last answer.
func TestTimeoutLineOfALockTmpFail(t *testing.T) {
	inv := &invocation{env: &env_{getenv: func(string) string { return "" }}, opTimeout: 2500 * time.Millisecond}
	for _, c := range []struct {
		op     string
		opcode client.OpCode
	}{{"LookupIn", 0xd0}, {"MutateIn", 0xd1}, {"Remove", 0x04}} {
		kv := &client.KeyValueError{Op: c.op, Key: "k", OpCode: c.opcode, Node: "h:11210", Status: client.StatusTmpFail,
			RetryAttempts: 9, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVLocked),
			StatusReason: client.RetryReasonKVLocked,
			Err:          client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
		p := inv.explain("k", kv)
		assert.Contains(t, p.line, "retried 9 times for KV_LOCKED: the document stayed locked", "%s: %s", c.op, p.line)
		assert.NotContains(t, p.line, "answered ETMPFAIL last", "%s: %s", c.op, p.line)
	}
	kv := &client.KeyValueError{Op: "Upsert", Key: "k", OpCode: 0x01, Node: "h:11210", Status: client.StatusTmpFail,
		RetryAttempts: 9, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVLocked),
		StatusReason: client.RetryReasonKVTemporaryFailure,
		Err:          client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p := inv.explain("k", kv)
	assert.Contains(t, p.line, "answered ETMPFAIL last", p.line)
}

// errTimeoutCause matches what a client timeout's cause matches.
var errTimeoutCause = fmt.Errorf("%w: %w", client.ErrUnambiguousTimeout, client.ErrTimeout)

// A read whose answer is longer than kvwire reads (a memcached -I over
// 20m holds such values) fails with ErrValueTooLarge too: its line must
// not say the server refused the value, which it stored and sent.
func TestValueTooLargeLineOfARead(t *testing.T) {
	inv := &invocation{env: &env_{getenv: func(string) string { return "" }}, opTimeout: 2500 * time.Millisecond}
	kv := &client.KeyValueError{Op: "Get", Key: "big", Node: "h:11211",
		Err: client.ErrValueTooLarge, Cause: fmt.Errorf("conn h:11211: protocol violation: body of 20971530 bytes exceeds the limit of 20971520")}
	p := inv.explain("big", kv)
	assert.NotContains(t, p.line, "than the server accepts", p.line)
	assert.Contains(t, p.line, "kvwire reads", p.line)

	// The server's own refusal (E2BIG) keeps its line.
	kv = &client.KeyValueError{Op: "Upsert", Key: "big", Node: "h:11211", Status: client.StatusTooBig, Err: client.ErrValueTooLarge}
	p = inv.explain("big", kv)
	assert.Contains(t, p.line, "larger than the server accepts", p.line)
}

// RetryReasons names only the retries made: the reason of the last
// answer, whose retry's wait ran into the deadline, is not among them
// when no earlier retry had it. The line still says what the node
// answered last: a Get retried once for NOT_MY_VBUCKET that then kept
// getting TMPFAIL is not only "the cluster map kept changing".
func TestTimeoutLineSaysTheLastAnswerAfterOtherRetries(t *testing.T) {
	inv := &invocation{env: &env_{getenv: func(string) string { return "" }}, opTimeout: 2500 * time.Millisecond}
	kv := &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Vbucket: 7, Status: client.StatusTmpFail,
		RetryAttempts: 1, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVNotMyVbucket),
		StatusReason: client.RetryReasonKVTemporaryFailure,
		Err:          client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p := inv.explain("k", kv)
	assert.Contains(t, p.line, "retried 1 time for KV_NOT_MY_VBUCKET", p.line)
	assert.Contains(t, p.line, "h:11210 answered ETMPFAIL last", p.line)

	// The last answer is the reason retried for: said once.
	kv = &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Vbucket: 7, Status: client.StatusTmpFail,
		RetryAttempts: 3, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVTemporaryFailure),
		StatusReason: client.RetryReasonKVTemporaryFailure,
		Err:          client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p = inv.explain("k", kv)
	assert.NotContains(t, p.line, "answered", p.line)

	// A status retried because the node's error map says so: its reason
	// is the error map's, and the line names the status.
	kv = &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Vbucket: 7, Status: client.StatusBusy, ErrorName: "EBUSY",
		RetryAttempts: 3, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVErrorMapRetryIndicated),
		StatusReason: client.RetryReasonKVErrorMapRetryIndicated,
		Err:          client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p = inv.explain("k", kv)
	assert.Contains(t, p.line, "retried 3 times for KV_ERROR_MAP_RETRY_INDICATED: the server kept answering EBUSY, a status its error map says to retry", p.line)
	assert.NotContains(t, p.line, "answered EBUSY last", p.line)
}

// The server's extended error information (XERROR's context and ref) of
// the last answer is what a person takes to the server's logs: a timeout's
// line says it whenever the error carries it, whether or not the line
// names the status it came with.
func TestTimeoutLineSaysTheServersErrorContext(t *testing.T) {
	inv := &invocation{env: &env_{getenv: func(string) string { return "" }}, opTimeout: 2500 * time.Millisecond}
	for _, kv := range []*client.KeyValueError{
		{Op: "Upsert", Key: "k", Node: "h:11210", Vbucket: 7, Status: client.StatusLocked,
			ServerContext: "held by compaction", ServerErrorRef: "4f1c-77",
			Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause},
		// The last answer is the reason retried for: the line names no
		// status, but still the context.
		{Op: "Get", Key: "k", Node: "h:11210", Vbucket: 7, Status: client.StatusTmpFail,
			ServerContext: "held by compaction", ServerErrorRef: "4f1c-77",
			RetryAttempts: 3, RetryReasons: client.RetryReasons(0).With(client.RetryReasonKVTemporaryFailure),
			Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause},
	} {
		p := inv.explain("k", kv)
		assert.Equal(t, kindTimeout, p.kind)
		assert.Contains(t, p.line, `the server said "held by compaction" (ref 4f1c-77)`, p.line)
	}

	// A ref alone (an answer whose error JSON has no context).
	kv := &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Status: client.StatusTmpFail,
		ServerErrorRef: "4f1c-77", Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	assert.Contains(t, inv.explain("k", kv).line, "(ref 4f1c-77)")

	// Neither: nothing is added.
	kv = &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Status: client.StatusTmpFail,
		Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p := inv.explain("k", kv)
	assert.NotContains(t, p.line, "server said", p.line)
	assert.NotContains(t, p.line, "ref", p.line)

	// The context is the server's words: the password is masked in them.
	inv.g.password = "s3cret"
	kv = &client.KeyValueError{Op: "Get", Key: "k", Node: "h:11210", Status: client.StatusTmpFail,
		ServerContext: "user s3cret busy", Err: client.ErrUnambiguousTimeout, Cause: errTimeoutCause}
	p = inv.explain("k", kv)
	assert.NotContains(t, p.line, "s3cret", p.line)
	assert.Contains(t, p.line, `"user **** busy"`, p.line)
}
