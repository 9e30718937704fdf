package mockcluster

// How every mutation commits and answers: at once, or as a synchronous
// (durable) write that stays pending until its commit or abort.

import (
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// mutResult is what a committed mutation answers.
type mutResult struct {
	cas, seqno, vbUUID uint64
	counter            uint64
}

// reqHeader keeps what a deferred response needs from a request whose
// buffer will be reused.
func reqHeader(p *memdx.Packet) *memdx.Packet {
	return &memdx.Packet{OpCode: p.OpCode, Opaque: p.Opaque}
}

// mutated answers a successful mutation (nothing for a quiet opcode), with
// the mutation token when MutationSeqno was negotiated.
func (cn *conn) mutated(h *memdx.Packet, r mutResult, value []byte) {
	if h.OpCode.IsQuiet() {
		return
	}
	var ext [16]byte
	cn.reply(h, memdx.StatusSuccess, r.cas, 0, cn.tokenExtras(&ext, r), nil, value)
}

// tokenExtras are a mutation's response extras: its mutation token
// (vbucket UUID, seqno) in buf when MutationSeqno was negotiated, else
// none.
func (cn *conn) tokenExtras(buf *[16]byte, r mutResult) []byte {
	if !cn.has(memdx.FeatureMutationSeqno) {
		return nil
	}
	putUint64(buf[0:8], r.vbUUID)
	putUint64(buf[8:16], r.seqno)
	return buf[:]
}

// commitMutation finishes a mutation whose checks passed, with t.vb.mu held
// (it unlocks it). A plain write commits now; a synchronous write checks
// that its durability is possible and, with a sync-write delay, stays
// pending (other writers of the key get SYNC_WRITE_IN_PROGRESS) until a
// timer commits it. When the request's durability timeout ends first, the
// write is aborted, never applied, and answered SYNC_WRITE_AMBIGUOUS, as
// kv_engine's ActiveDurabilityMonitor aborts an expired SyncWrite
// (engines/ep/src/durability/active_durability_monitor.cc, processTimeout;
// VBucket::abort in engines/ep/src/vbucket.cc answers the client
// sync_write_ambiguous).
func (cn *conn) commitMutation(p *memdx.Packet, t target, f frames, commit func(now time.Time) mutResult,
	respond func(h *memdx.Packet, r mutResult)) outcome {
	if f.durable {
		chain := t.s.chains[p.Vbucket]
		have := 0
		for _, id := range chain {
			if id >= 0 {
				have++
			}
		}
		if have < len(chain)/2+1 {
			t.vb.mu.Unlock()
			cn.failExec(p, memdx.StatusDurabilityImpossible, "Not enough replicas for the durability level")
			return outcome{}
		}
	}
	delay := time.Duration(cn.c.syncWriteDelay.Load())
	if !f.durable || delay <= 0 {
		r := commit(cn.c.clock.Now())
		t.vb.mu.Unlock()
		respond(p, r)
		return outcome{}
	}
	mk := string(t.mk)
	sw := &syncWrite{done: make(chan struct{})}
	t.vb.pending[mk] = sw
	t.vb.mu.Unlock()
	h := reqHeader(p)
	answer := func() {
		if sw.aborted {
			cn.failExec(h, memdx.StatusSyncWriteAmbiguous, "The durability timeout expired before the synchronous write was committed")
			return
		}
		respond(h, sw.res)
	}
	abortAfter := time.Duration(0)
	if f.timeout > 0 && f.timeout < delay {
		abortAfter = f.timeout
	}
	if cn.has(memdx.FeatureUnorderedExecution) {
		cn.owe()
		sw.onDone = func() {
			cn.wmu.Lock()
			defer cn.wmu.Unlock()
			if !cn.wclosed {
				answer()
				cn.paid()
				_ = cn.flushLocked()
			}
		}
		cn.c.scheduleCommit(t.vb, mk, sw, delay, abortAfter, commit)
		return outcome{}
	}
	cn.c.scheduleCommit(t.vb, mk, sw, delay, abortAfter, commit)
	return outcome{wait: sw.done, then: answer}
}

// syncWrite is a pending synchronous write.
type syncWrite struct {
	done chan struct{}
	res  mutResult
	// aborted is set when the durability timeout ended the write unapplied.
	aborted bool
	onDone  func()
}

// scheduleCommit commits sw after d, or, when abortAfter is not 0 (it is
// then shorter than d), aborts it after abortAfter. CommitSyncWrites
// commits it before either.
func (c *Cluster) scheduleCommit(vb *vbucket, mk string, sw *syncWrite, d, abortAfter time.Duration, commit func(time.Time) mutResult) {
	finish := func(abort bool) {
		vb.mu.Lock()
		delete(vb.pending, mk)
		if abort {
			sw.aborted = true
		} else {
			sw.res = commit(c.clock.Now())
		}
		vb.mu.Unlock()
		close(sw.done)
		if sw.onDone != nil {
			sw.onDone()
		}
	}
	run := func() { finish(false) }
	fire := run
	if abortAfter > 0 {
		d = abortAfter
		fire = func() { finish(true) }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	fired := c.syncFired
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		if fired != nil {
			fired()
		}
		// The entry in c.timers is the claim on the commit: whoever removes
		// it (this callback, or CommitSyncWrites) runs it, exactly once.
		c.mu.Lock()
		_, mine := c.timers[t]
		delete(c.timers, t)
		c.mu.Unlock()
		if mine {
			fire()
		}
	})
	c.timers[t] = run
}

// PendingSyncWrites returns how many synchronous writes wait for their
// commit.
func (c *Cluster) PendingSyncWrites() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// CommitSyncWrites commits every pending synchronous write now, instead of
// when the sync-write delay ends, and answers their clients.
func (c *Cluster) CommitSyncWrites() {
	c.mu.Lock()
	runs := make([]func(), 0, len(c.timers))
	for t, run := range c.timers {
		// Removing the entry claims the write: a timer that already fired
		// finds it gone and leaves the commit to us, so run it whatever Stop
		// says (skipping it would leave the write unanswered and its key
		// blocked by SYNC_WRITE_IN_PROGRESS for good).
		t.Stop()
		delete(c.timers, t)
		runs = append(runs, run)
	}
	c.mu.Unlock()
	for _, run := range runs {
		run()
	}
}

// pendingCheck answers SYNC_WRITE_IN_PROGRESS when the key has a pending
// synchronous write. vb.mu must be held; on false it was released.
func (cn *conn) pendingCheck(p *memdx.Packet, t target) bool {
	if t.vb.pending[string(t.mk)] != nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusSyncWriteInProgress, "A synchronous write on this key is in progress")
		return false
	}
	return true
}
