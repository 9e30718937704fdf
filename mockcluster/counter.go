package mockcluster

// INCREMENT and DECREMENT (and their quiet forms).

import (
	"strconv"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

func (cn *conn) counter(p *memdx.Packet) outcome {
	if len(p.Extras) != 20 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "INCREMENT/DECREMENT extras must be delta, initial and expiry (20 bytes), no value")
		return outcome{}
	}
	if p.Cas != 0 {
		// kv_engine's validator for INCREMENT/DECREMENT requires CAS 0.
		cn.fail(p, memdx.StatusInvalidArgs, "Request CAS must not be set")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, true)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locateMutation(p, f)
	if !ok {
		return outcome{}
	}
	incr := p.OpCode == memdx.OpIncrement || p.OpCode == memdx.OpIncrementQ
	delta, initial := getUint64(p.Extras[0:8]), getUint64(p.Extras[8:16])
	rawExp := getUint32(p.Extras[16:20])
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	var nd *document
	var newVal uint64
	switch {
	case d == nil && rawExp == memdx.NoCreate:
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return outcome{}
	case d == nil:
		newVal = initial
		nd = &document{expiry: expiry(rawExp, now)}
	default:
		if st := casCheck(d, p.Cas, now); st != memdx.StatusSuccess {
			t.vb.mu.Unlock()
			cn.fail(p, st, "")
			return outcome{}
		}
		cur, ok := parseCounter(d.value)
		if !ok {
			t.vb.mu.Unlock()
			cn.fail(p, memdx.StatusBadDelta, "The document is not a number")
			return outcome{}
		}
		switch {
		case incr:
			newVal = cur + delta // wraps at 2^64, as the server does
		case delta > cur:
			newVal = 0
		default:
			newVal = cur - delta
		}
		nd = &document{flags: d.flags, expiry: d.expiry, xattrs: d.xattrs}
	}
	nd.value = strconv.AppendUint(nil, newVal, 10)
	nd.datatype = memdx.DatatypeJSON
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		vb.store(mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid, counter: newVal}
	}, func(h *memdx.Packet, r mutResult) {
		var v [8]byte
		putUint64(v[:], r.counter)
		cn.mutated(h, r, v[:])
	})
}

// parseCounter reads a counter document's value as kv_engine's
// safe_strtoull does (parseInt in utilities/util.cc): leading white space
// and a '+' are skipped, then decimal digits that fit a uint64 must follow,
// ending the value or followed by white space (and whatever comes after it).
// So "7\n", " 7" and "+7" are 7; "", "-1", "7x" and 2^64 are not numbers.
func parseCounter(v []byte) (uint64, bool) {
	i := 0
	for i < len(v) && isCSpace(v[i]) {
		i++
	}
	if i < len(v) && v[i] == '+' {
		i++
	}
	start := i
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == start || (i < len(v) && !isCSpace(v[i])) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v[start:i]), 10, 64)
	return n, err == nil
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
