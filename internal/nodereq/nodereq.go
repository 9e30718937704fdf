// Package nodereq is the requests to each node rather than for a key:
// Stats (STAT), Version (VERSION), Ping (NOOP) and, for memcached://, Flush
// (FLUSH). Each goes to every node of the current topology at once (or the
// one node its options name: Select) as an operation addressed to that
// node, through the client's one engine, sent once: a node that fails has
// its own error in its result, and the call's error joins those errors (nil
// when every node answered). Here are which nodes a call goes to, the
// requests, and the reading of their answers; the client runs them
// (internal/fanout's Each) and builds their public results.
package nodereq

import (
	"encoding/binary"
	"slices"

	"github.com/kvwire/kvwire/memdx"
)

// Select picks the nodes a call goes to: every one of nodes, or, when only
// is set, the one whose address it is (false when none is).
func Select[N interface{ Addr() string }](nodes []N, only string) ([]N, bool) {
	if only == "" {
		return nodes, true
	}
	i := slices.IndexFunc(nodes, func(n N) bool { return n.Addr() == only })
	if i < 0 {
		return nil, false
	}
	return nodes[i : i+1], true
}

// Stats collects a node's answers to STAT: one packet per statistic, then
// one without a key that ends them.
type Stats map[string]string

// Handle reads one answer (the operation's handler): it keeps a
// successful one and leaves any other to the engine.
func (s Stats) Handle(p *memdx.Packet) (bool, error) {
	if p.Status != memdx.StatusSuccess {
		return false, nil
	}
	if len(p.Key) > 0 { // the last packet has none
		s[string(p.Key)] = string(p.Value)
	}
	return true, nil
}

// Version holds a node's answer to VERSION.
type Version struct{ Version string }

// Handle reads the answer (the operation's handler): it keeps a
// successful one and leaves any other to the engine.
func (v *Version) Handle(p *memdx.Packet) (bool, error) {
	if p.Status != memdx.StatusSuccess {
		return false, nil
	}
	v.Version = string(p.Value)
	return true, nil
}

// FlushExtras are FLUSH's extras for a delayed flush: exp, the protocol's
// expiry of the delay.
func FlushExtras(exp uint32) []byte { return binary.BigEndian.AppendUint32(nil, exp) }

// Flush is FLUSH with extras (nil: at once), one node's request.
func Flush(extras []byte) memdx.Request {
	req := memdx.NewFlush()
	req.Extras = extras
	return req
}
