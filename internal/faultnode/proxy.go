package faultnode

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Proxy relays client connections to an upstream node and injects faults
// on command. Every method is safe for concurrent use.
type Proxy struct {
	upstream string
	ln       net.Listener
	ctx      context.Context // cancelled by Close: ends upstream dials
	cancel   context.CancelFunc
	wg       sync.WaitGroup // every goroutine the proxy started

	mu        sync.Mutex
	closed    bool
	conns     map[*Conn]struct{}
	blackhole bool
	refuse    bool
	dupMatch  func(req, resp *memdx.Packet) bool
	dupDelay  time.Duration
	stall     *Stall
	onReq     func(req *memdx.Packet) Action
	onResp    func(req, resp *memdx.Packet) Action
	ports     map[string]string
	requests  map[memdx.OpCode]int
	forwarded int
	dropped   int
	textDrop  int
	textGets  int
	accepted  int
	waiters   map[memdx.OpCode][]chan memdx.Packet
}

// NewProxy listens on 127.0.0.1 (a port the OS chooses) and relays each
// connection to upstreamAddr, which it dials when the client connects.
func NewProxy(upstreamAddr string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnode: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{upstream: upstreamAddr, ln: ln, ctx: ctx, cancel: cancel,
		conns: map[*Conn]struct{}{}, requests: map[memdx.OpCode]int{}, waiters: map[memdx.OpCode][]chan memdx.Packet{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection, releases any stall and
// waits for every goroutine the proxy started.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.connList()
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) connList() []*Conn {
	out := make([]*Conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// Conns returns the client connections open now.
func (p *Proxy) Conns() []*Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connList()
}

// Blackhole turns the black hole on or off. While on, requests and
// responses are read and dropped (counted by Dropped; on text connections,
// bytes counted by TextDropped); nothing read during the black hole is ever
// delivered.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	p.mu.Unlock()
}

// RefuseNew makes the proxy reset each new connection as soon as it is
// accepted (on) or relay it again (off). Open connections are unaffected:
// Reset closes those.
func (p *Proxy) RefuseNew(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Reset closes every open client connection with a TCP RST (and its
// upstream connection).
func (p *Proxy) Reset() {
	for _, c := range p.Conns() {
		c.Reset()
	}
}

// DuplicateResponses sends every response for which match returns true
// twice: the copy follows at once when delay is 0, else after delay. req is
// the request the response answers (nil when none is known). A nil match
// turns duplication off. Text connections have no responses to match.
func (p *Proxy) DuplicateResponses(match func(req, resp *memdx.Packet) bool, delay time.Duration) {
	p.mu.Lock()
	p.dupMatch, p.dupDelay = match, delay
	p.mu.Unlock()
}

// OnRequest sets the hook every client request goes through (nil removes
// it). It runs on the connection's reader goroutine, without proxy locks:
// it may call the proxy's methods, and while it runs that connection reads
// nothing. The packet is valid only during the call. A request the black
// hole swallows never reaches the hook, nor does anything on a text
// connection.
func (p *Proxy) OnRequest(h func(req *memdx.Packet) Action) {
	p.mu.Lock()
	p.onReq = h
	p.mu.Unlock()
}

// OnResponse sets the hook every upstream response goes through (nil
// removes it), with the request it answers (nil for a server-initiated
// packet or an unknown opaque). It runs as OnRequest's hook does.
func (p *Proxy) OnResponse(h func(req, resp *memdx.Packet) Action) {
	p.mu.Lock()
	p.onResp = h
	p.mu.Unlock()
}

// RewritePorts makes the proxy replace, in every config the node sends
// (GET_CLUSTER_CONFIG answers, NOT_MY_VBUCKET bodies, cluster-map change
// notifications), each port that is a key of ports by its value, so that a
// client bootstrapping through proxies is routed through them too: give
// each node's port its proxy's port. A snappy-compressed config (the
// node's form once a client negotiates SnappyEverywhere) is decompressed,
// rewritten and compressed again. nil turns rewriting off. The OnResponse
// hook sees the rewritten config.
func (p *Proxy) RewritePorts(ports map[string]string) {
	p.mu.Lock()
	p.ports = maps.Clone(ports)
	p.mu.Unlock()
}

// Port returns the port part of an address ("127.0.0.1:1234" → "1234").
func Port(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// RewriteConfigPorts returns config with each port that is a key of ports
// replaced by its value, wherever it stands as a port in a Couchbase config:
// "host:PORT" strings and "service":PORT numbers.
func RewriteConfigPorts(config []byte, ports map[string]string) []byte {
	for from, to := range ports {
		for _, f := range []string{`:%s"`, `":%s,`, `":%s}`} {
			config = bytes.ReplaceAll(config, []byte(fmt.Sprintf(f, from)), []byte(fmt.Sprintf(f, to)))
		}
	}
	return config
}

// isConfig reports whether an upstream packet carries a config (plain or
// snappy-compressed).
func isConfig(p *memdx.Packet) bool {
	if len(p.Value) == 0 {
		return false
	}
	if p.Magic == memdx.MagicServerReq {
		return p.ServerOpCode == memdx.ServerOpClustermapChangeNotification
	}
	return p.Magic.IsResponse() && (p.OpCode == memdx.OpGetClusterConfig || p.Status == memdx.StatusNotMyVbucket)
}

// rewriteConfig returns pkt's config with its ports rewritten, in the form
// it came in: compressed again when it came snappy-compressed. A
// compressed config that does not decompress is an error: the connection
// closes rather than pass on a config the proxy could not rewrite.
func rewriteConfig(pkt *memdx.Packet, ports map[string]string) ([]byte, error) {
	if !pkt.Datatype.Has(memdx.DatatypeSnappy) {
		return RewriteConfigPorts(pkt.Value, ports), nil
	}
	cfg, err := memdx.DecompressSnappy(nil, pkt.Value, MaxBody)
	if err != nil {
		return nil, fmt.Errorf("faultnode: a snappy config from the node: %w", err)
	}
	return memdx.CompressSnappy(nil, RewriteConfigPorts(cfg, ports)), nil
}

// Inject writes b to every open client connection and returns how many it
// reached. b goes out whole, between two packets.
func (p *Proxy) Inject(b []byte) int {
	n := 0
	for _, c := range p.Conns() {
		if c.Write(b) == nil {
			n++
		}
	}
	return n
}

// InjectResponse encodes pkt and writes it to every open client connection
// (see Inject). For a stray response, give it the opaque StrayOpaque.
func (p *Proxy) InjectResponse(pkt memdx.Packet) (int, error) {
	b, err := Encode(pkt)
	if err != nil {
		return 0, err
	}
	return p.Inject(b), nil
}

// Requests returns how many client requests with opcode op the proxy has
// read (forwarded, answered by a hook, or dropped) on binary connections.
func (p *Proxy) Requests(op memdx.OpCode) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[op]
}

// Forwarded returns how many responses (or hook replacements) reached the
// binary clients, duplicates included.
func (p *Proxy) Forwarded() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded
}

// Dropped returns how many packets the black hole or a hook dropped on
// binary connections.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// TextGets returns how many text multi-gets (lines starting "gets " or
// "get ") clients sent to the node through the proxy; a line the black hole
// swallowed is not counted.
func (p *Proxy) TextGets() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.textGets
}

// TextDropped returns how many bytes, both ways, the black hole dropped on
// text connections (which have no packets to count).
func (p *Proxy) TextDropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.textDrop
}

// Accepted returns how many client connections the proxy has accepted,
// refused ones included.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// NextRequest returns a channel that receives (a copy of) the next client
// request with opcode op, on any connection, before any fault or hook
// applies to it. Call it before the action that sends the request.
func (p *Proxy) NextRequest(op memdx.OpCode) <-chan memdx.Packet {
	ch := make(chan memdx.Packet, 1)
	p.mu.Lock()
	p.waiters[op] = append(p.waiters[op], ch)
	p.mu.Unlock()
	return ch
}

// Stall is a response held part-way (see StallNextResponse).
type Stall struct {
	n       int
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// StallNextResponse makes the next response, on whichever connection comes
// first, go out as its first n bytes only (at most all but its last byte);
// the rest follows when Release is called (or the connection or the proxy
// closes). Nothing else is written to that client meanwhile. A later call
// replaces a stall that has not started yet. On a text connection the
// response is the next bytes one read from the node returns, however the
// node's writes cut them.
func (p *Proxy) StallNextResponse(n int) *Stall {
	s := &Stall{n: n, reached: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.stall = s
	p.mu.Unlock()
	return s
}

// Reached is closed once the first bytes have been written.
func (s *Stall) Reached() <-chan struct{} { return s.reached }

// Release lets the rest of the response go. It may be called more than
// once, and before the stall is reached (the response then goes out whole).
func (s *Stall) Release() { s.once.Do(func() { close(s.release) }) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		p.accepted++
		refuse := p.refuse || p.closed
		p.mu.Unlock()
		if refuse {
			resetConn(nc)
			continue
		}
		var d net.Dialer
		up, err := d.DialContext(p.ctx, "tcp", p.upstream)
		if err != nil {
			resetConn(nc)
			continue
		}
		c := &Conn{p: p, client: nc, server: up, done: make(chan struct{}), decided: make(chan struct{}),
			inflight: map[uint32]memdx.Packet{}}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(nc)
			up.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go c.requests()
		go c.responses()
	}
}

// Conn is one relayed client connection. Its client's first byte decides
// its protocol, as memcached decides on it: a binary magic (any of memdx's
// six) makes it a binary connection, relayed packet by packet; anything
// else a text connection, relayed byte for byte (see relayText).
type Conn struct {
	p       *Proxy
	client  net.Conn
	server  net.Conn
	done    chan struct{}
	once    sync.Once
	wmu     sync.Mutex    // serialises writes to the client
	decided chan struct{} // closed once text is set
	text    bool

	mu       sync.Mutex
	inflight map[uint32]memdx.Packet // forwarded requests by opaque
}

// Close closes the connection and its upstream connection (a FIN).
func (c *Conn) Close() { c.end(false) }

// Reset closes the connection with a TCP RST, and its upstream connection.
func (c *Conn) Reset() { c.end(true) }

// Done is closed once the connection has been closed (by either side).
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) end(rst bool) {
	c.once.Do(func() {
		close(c.done)
		if rst {
			resetConn(c.client)
		} else {
			c.client.Close()
		}
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// Write writes b to the client, between two packets (on a text connection,
// between two relayed reads).
func (c *Conn) Write(b []byte) error { return c.write(b, nil) }

// write sends b to the client; with a stall, only its first bytes until
// the stall is released.
func (c *Conn) write(b []byte, s *Stall) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if s != nil {
		n := max(0, min(s.n, len(b)-1))
		if _, err := c.client.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
		close(s.reached)
		select {
		case <-s.release:
		case <-c.done:
			return net.ErrClosed
		}
	}
	_, err := c.client.Write(b)
	return err
}

// requests relays client → upstream. It decides the connection's
// protocol on the client's first byte.
func (c *Conn) requests() {
	p := c.p
	defer p.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c.client)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	c.text = !memdx.Magic(first[0]).Valid()
	close(c.decided)
	if c.text {
		c.relayText(br, true)
		return
	}
	r := newPacketReader(br)
	for {
		pkt, b, err := r.next()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.requests[pkt.OpCode]++
		for _, ch := range p.waiters[pkt.OpCode] {
			ch <- pkt // buffered, one send each; pkt's buffer is never reused
		}
		delete(p.waiters, pkt.OpCode)
		blackhole, hook := p.blackhole, p.onReq
		if blackhole {
			p.dropped++
		}
		p.mu.Unlock()
		if blackhole {
			continue
		}
		if hook != nil {
			a := hook(&pkt)
			if a.Drop {
				p.count(&p.dropped)
				continue
			}
			if a.Send != nil {
				out, err := Encode(a.Send...)
				if err != nil || c.write(out, nil) != nil {
					return
				}
				p.count(&p.forwarded)
				continue
			}
		}
		c.mu.Lock()
		c.inflight[pkt.Opaque] = pkt
		c.mu.Unlock()
		if _, err := c.server.Write(b); err != nil {
			return
		}
	}
}

func (p *Proxy) count(n *int) {
	p.mu.Lock()
	*n++
	p.mu.Unlock()
}

// responses relays upstream → client, once requests has decided the
// protocol. A node that closes first closes the client connection at once.
func (c *Conn) responses() {
	p := c.p
	defer p.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c.server)
	if _, err := br.Peek(1); err != nil {
		return
	}
	select {
	case <-c.decided:
	case <-c.done:
		return
	}
	if c.text {
		c.relayText(br, false)
		return
	}
	r := newPacketReader(br)
	for {
		pkt, b, err := r.next()
		if err != nil {
			return
		}
		var req *memdx.Packet
		if pkt.Magic.IsResponse() && !pkt.Magic.IsServerInitiated() {
			c.mu.Lock()
			if q, ok := c.inflight[pkt.Opaque]; ok {
				req = &q
				// A STAT is answered by several packets; an empty key ends it.
				if q.OpCode != memdx.OpStat || len(pkt.Key) == 0 {
					delete(c.inflight, pkt.Opaque)
				}
			}
			c.mu.Unlock()
		}
		p.mu.Lock()
		blackhole, hook, ports := p.blackhole, p.onResp, p.ports
		if blackhole {
			p.dropped++
		}
		p.mu.Unlock()
		if blackhole {
			continue
		}
		if ports != nil && isConfig(&pkt) {
			if pkt.Value, err = rewriteConfig(&pkt, ports); err != nil {
				return
			}
			if b, err = Encode(pkt); err != nil {
				return
			}
		}
		if hook != nil {
			a := hook(req, &pkt)
			if a.Drop {
				p.count(&p.dropped)
				continue
			}
			if a.Send != nil {
				if b, err = Encode(a.Send...); err != nil {
					return
				}
			}
		}
		p.mu.Lock()
		s := p.stall
		p.stall = nil
		match, delay := p.dupMatch, p.dupDelay
		p.mu.Unlock()
		dup := match != nil && match(req, &pkt)
		p.count(&p.forwarded)
		if dup {
			p.count(&p.forwarded)
		}
		if err := c.write(b, s); err != nil {
			return
		}
		if !dup {
			continue
		}
		if delay == 0 {
			if c.write(b, nil) != nil {
				return
			}
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
				c.write(b, nil)
			case <-c.done:
			}
		}()
	}
}

// relayText copies a text connection's bytes one way as they come: from
// the client to the node (fromClient) or back. Of the faults, the black
// hole drops what is read while it is on (counted by TextDropped), and a
// stall holds the node's next read part-way; Reset, RefuseNew and Close
// apply as to any connection. Hooks, request counts, duplicates and port
// rewriting need packets: they do not apply.
func (c *Conn) relayText(src io.Reader, fromClient bool) {
	p := c.p
	buf := make([]byte, 64<<10)
	var lines textLines
	for {
		n, err := src.Read(buf)
		if n > 0 {
			var s *Stall
			p.mu.Lock()
			blackhole := p.blackhole
			if blackhole {
				p.textDrop += n
			} else if !fromClient {
				s, p.stall = p.stall, nil
			} else {
				p.textGets += lines.gets(buf[:n])
			}
			p.mu.Unlock()
			if !blackhole {
				var werr error
				if fromClient {
					_, werr = c.server.Write(buf[:n])
				} else {
					werr = c.write(buf[:n], s)
				}
				if werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// textLines follows a client's text stream across reads to count the
// lines that are multi-gets.
type textLines struct {
	head []byte // the current line's first bytes, up to 5
}

// gets reads b and returns how many lines that start "get " or "gets "
// it ended.
func (l *textLines) gets(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			if h := string(l.head); strings.HasPrefix(h, "get ") || h == "gets " {
				n++
			}
			l.head = l.head[:0]
			continue
		}
		if len(l.head) < 5 {
			l.head = append(l.head, c)
		}
	}
	return n
}
