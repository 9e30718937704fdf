package conn

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/kvwire/kvwire/memdx"
)

// maxEarly and maxEarlyBytes bound the server requests held while Dial
// bootstraps (see serverRequest); past them more are dropped.
const (
	maxEarly      = 16
	maxEarlyBytes = 4 << 20
)

// callbacks gates the connection's callbacks (OnClose, and the server
// requests' OnClustermapNotification and OnServerRequest): a connection
// Dial discards fires none, and server requests that arrive during the
// bootstrap are held until Dial returns the connection. Fields are guarded
// by Conn.mu; heldBack is also read without it, on the reader's fast path.
type callbacks struct {
	// live: Dial is returning this connection, so its callbacks may run.
	live bool
	// heldBack is true until Dial has delivered the server requests that
	// arrived during the bootstrap, which are kept in early (copies;
	// earlyBytes their size); held is closed when that is done.
	heldBack   atomic.Bool
	early      []memdx.Packet
	earlyBytes int
	held       chan struct{}
}

func (cb *callbacks) init() {
	cb.held = make(chan struct{})
	cb.heldBack.Store(true)
}

// serverRequest hands a server-initiated packet to its callback. Until Dial
// decides to return the connection it only keeps a copy: a connection Dial
// discards fires no callback, and goLive delivers what was kept.
func (c *Conn) serverRequest(p *memdx.Packet) {
	cb := &c.callbacks
	if cb.heldBack.Load() {
		c.mu.Lock()
		if cb.heldBack.Load() {
			size := len(p.FramingExtras) + len(p.Extras) + len(p.Key) + len(p.Value)
			keep := len(cb.early) < maxEarly && cb.earlyBytes+size <= maxEarlyBytes
			if keep {
				cb.early = append(cb.early, copyPacket(p))
				cb.earlyBytes += size
			}
			c.mu.Unlock()
			if !keep {
				c.log.Warn("dropping a server request sent during the bootstrap: too many held", "opcode", p.ServerOpCode)
			}
			return
		}
		c.mu.Unlock()
	}
	c.deliver(p)
}

// copyPacket returns p with slices of its own.
func copyPacket(p *memdx.Packet) memdx.Packet {
	q := *p
	q.FramingExtras = append([]byte(nil), p.FramingExtras...)
	q.Extras = append([]byte(nil), p.Extras...)
	q.Key = append([]byte(nil), p.Key...)
	q.Value = append([]byte(nil), p.Value...)
	return q
}

// goLive is Dial's last step for the connection it returns: from now on
// OnClose fires, and the server requests held during the bootstrap are
// delivered, in order, on the calling goroutine; the reader holds back any
// that arrive meanwhile, so callbacks never run concurrently. A connection
// that has already ended is reported as a bootstrap failure at step
// instead (it fires no callback).
func (c *Conn) goLive(step memdx.OpCode) error {
	cb := &c.callbacks
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return &BootstrapError{Addr: c.addr, Step: step, Reason: "the connection ended as the bootstrap completed", Err: err}
	}
	cb.live = true
	c.noteActivity(c.health.Now())
	for {
		early := cb.early
		cb.early, cb.earlyBytes = nil, 0
		if len(early) == 0 {
			cb.heldBack.Store(false)
			c.mu.Unlock()
			close(cb.held)
			return nil
		}
		c.mu.Unlock()
		for i := range early {
			c.deliver(&early[i])
		}
		c.mu.Lock()
	}
}

func (c *Conn) deliver(p *memdx.Packet) {
	if p.ServerOpCode == memdx.ServerOpClustermapChangeNotification && c.opts.OnClustermapNotification != nil {
		n, err := memdx.DecodeClustermapNotification(p)
		if err != nil {
			c.log.Warn("dropping malformed cluster-map notification", "err", err)
			return
		}
		c.opts.OnClustermapNotification(n)
		return
	}
	if c.opts.OnServerRequest != nil {
		c.opts.OnServerRequest(p)
		return
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("dropping server request", "opcode", p.ServerOpCode, "opaque", p.Opaque)
	}
}
