package mockcluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kvwire/kvwire/memdx"
)

// Node is one node of the cluster: a KV listener and a cluster manager
// (REST) listener, plus a TLS one of each with Options.TLS, on
// Options.Host (127.0.0.1 by default). The REST listener serves the config
// endpoints (see mgmt.go). Its methods are safe for concurrent use.
type Node struct {
	c  *Cluster
	id int

	// Ports are chosen by the OS at first start and kept across restarts.
	kvPort, tlsPort, mgmtPort, mgmtTLSPort int

	// guarded by c.mu
	failedOver bool
	// mgmtAdvertised, when not 0, is the REST port the configs name for
	// the node (AdvertiseMgmtPort).
	mgmtAdvertised int

	mu         sync.Mutex
	running    bool
	ln         *net.TCPListener
	tlsRaw     *net.TCPListener
	tlsLn      net.Listener
	mgmt       *http.Server
	mgmtLn     *net.TCPListener
	mgmtTLSRaw *net.TCPListener
	conns      map[*conn]struct{}
	serving    bool
	// down is closed when the node stops serving: REST handlers (config
	// streams) end. handlers counts the running ones; a handler starts
	// only while serving, and stop waits for them.
	down     chan struct{}
	handlers sync.WaitGroup

	reqs [256]atomic.Uint64

	errMu  sync.Mutex
	errors map[memdx.Status]uint64
}

// ID returns the node's id.
func (n *Node) ID() int { return n.id }

// Addr returns the node's KV address, "host:port" (host is Options.Host,
// 127.0.0.1 by default).
func (n *Node) Addr() string { return n.hostPort(n.kvPort) }

func (n *Node) hostPort(port int) string {
	return net.JoinHostPort(n.c.opts.Host, strconv.Itoa(port))
}

// TLSAddr returns the node's TLS KV address, or "" without Options.TLS.
func (n *Node) TLSAddr() string {
	if n.tlsPort == 0 {
		return ""
	}
	return n.hostPort(n.tlsPort)
}

// MgmtAddr returns the node's cluster manager (REST, HTTP) address.
func (n *Node) MgmtAddr() string { return n.hostPort(n.mgmtPort) }

// AdvertiseMgmtPort makes the configs (the bucket configs, the cluster
// config and /pools/default) name port, on the node's host, as the node's
// REST port ("mgmt") in place of the one it listens on, as a cluster
// manager reached through a port forward is named; 0 names its own port
// again. A client that bootstraps over HTTP streams its configs from the
// ports the configs name: the chaos test puts a fault proxy there. Every
// config is published anew with it. MgmtAddr, MgmtAddrs and
// HTTPConnString still name the port the node listens on.
func (n *Node) AdvertiseMgmtPort(port int) {
	c := n.c
	c.mu.Lock()
	defer c.unlock()
	if n.mgmtAdvertised == port {
		return
	}
	n.mgmtAdvertised = port
	if !c.closed {
		c.republishAllLocked()
	}
}

// mgmtPortNamed is the REST port the configs name for the node. c.mu is
// held.
func (n *Node) mgmtPortNamed() int {
	if n.mgmtAdvertised != 0 {
		return n.mgmtAdvertised
	}
	return n.mgmtPort
}

// MgmtTLSAddr returns the node's cluster manager HTTPS address (mgmtSSL),
// or "" without Options.TLS.
func (n *Node) MgmtTLSAddr() string {
	if n.mgmtTLSPort == 0 {
		return ""
	}
	return n.hostPort(n.mgmtTLSPort)
}

// Running reports whether the node is listening.
func (n *Node) Running() bool { return n.isRunning() }

func (n *Node) isRunning() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// RequestCount returns how many requests with opcode op the node received
// (every request the node read, whatever its answer, including requests a
// fault answered).
func (n *Node) RequestCount(op memdx.OpCode) uint64 { return n.reqs[op].Load() }

// RequestCounts returns the non-zero request counts by opcode.
func (n *Node) RequestCounts() map[memdx.OpCode]uint64 {
	out := make(map[memdx.OpCode]uint64)
	for i := range n.reqs {
		if v := n.reqs[i].Load(); v != 0 {
			out[memdx.OpCode(i)] = v
		}
	}
	return out
}

// ErrorCount returns how many responses with the (non-success) status st
// the node sent, counting injected ones. Tests use it to show, say, that a
// client met NOT_MY_VBUCKET during a rebalance.
func (n *Node) ErrorCount(st memdx.Status) uint64 {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.errors[st]
}

func (n *Node) countError(st memdx.Status) {
	n.errMu.Lock()
	if n.errors == nil {
		n.errors = make(map[memdx.Status]uint64)
	}
	n.errors[st]++
	n.errMu.Unlock()
}

// NumConnections returns the number of open client connections.
func (n *Node) NumConnections() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.conns)
}

// newNodeLocked returns the next node, not yet listening: its KV port is
// Options.KVPort's share when set. c.mu must be held.
func (c *Cluster) newNodeLocked() *Node {
	n := &Node{c: c, id: len(c.nodes), conns: make(map[*conn]struct{})}
	if c.opts.KVPort != 0 {
		n.kvPort = c.opts.KVPort + n.id
	}
	return n
}

// bindPort listens on host:*port; with *port 0 it lets the OS choose a
// port, then binds that port again explicitly, so that the kernel keeps the
// port with the socket when a stop pauses it (see pauseListener).
func bindPort(host string, port *int) (*net.TCPListener, error) {
	if *port != 0 {
		ln, err := net.Listen("tcp4", net.JoinHostPort(host, strconv.Itoa(*port)))
		if err != nil {
			return nil, err
		}
		return ln.(*net.TCPListener), nil
	}
	var err error
	for range 20 {
		var probe net.Listener
		if probe, err = net.Listen("tcp4", net.JoinHostPort(host, "0")); err != nil {
			return nil, err
		}
		p := probe.Addr().(*net.TCPAddr).Port
		probe.Close()
		var ln net.Listener
		if ln, err = net.Listen("tcp4", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			*port = p
			return ln.(*net.TCPListener), nil
		}
	}
	return nil, err
}

// listen opens (or, after a stop, reopens) the node's listeners on their
// ports. Ports are written only on the first start, before anyone reads
// them.
func (n *Node) listen() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return nil
	}
	open := func(ln **net.TCPListener, port *int) error {
		if *ln != nil {
			if err := resumeListener(*ln); err == nil {
				return nil
			}
			(*ln).Close()
			*ln = nil
		}
		l, err := bindPort(n.c.opts.Host, port)
		if err != nil {
			return fmt.Errorf("mockcluster: node %d: %w", n.id, err)
		}
		*ln = l
		return nil
	}
	if err := open(&n.ln, &n.kvPort); err != nil {
		return err
	}
	if err := open(&n.mgmtLn, &n.mgmtPort); err != nil {
		n.pauseOrClose(true)
		return err
	}
	if n.c.tls != nil {
		if err := open(&n.tlsRaw, &n.tlsPort); err != nil {
			n.pauseOrClose(true)
			return err
		}
		n.tlsLn = tls.NewListener(n.tlsRaw, n.c.tls.serverConfig)
		if err := open(&n.mgmtTLSRaw, &n.mgmtTLSPort); err != nil {
			n.pauseOrClose(true)
			return err
		}
	}
	n.running = true
	return nil
}

// pauseOrClose stops the listeners accepting: paused (port kept) unless
// final or the platform cannot; closed otherwise. n.mu must be held.
func (n *Node) pauseOrClose(final bool) {
	for _, l := range []**net.TCPListener{&n.ln, &n.mgmtLn, &n.tlsRaw, &n.mgmtTLSRaw} {
		if *l == nil {
			continue
		}
		if final || !pauseListener(*l) {
			(*l).Close()
			*l = nil
		}
	}
}

// serve starts the accept loops of a node that listens.
func (n *Node) serve() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running || n.serving {
		return
	}
	n.serving = true
	n.c.wg.Add(1)
	go n.accept(n.ln)
	if n.tlsLn != nil {
		n.c.wg.Add(1)
		go n.accept(n.tlsLn)
	}
	n.down = make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(n.serveMgmt), ErrorLog: n.c.httpErrorLog()}
	n.mgmt = srv
	lns := []net.Listener{keepOpen{n.mgmtLn}}
	if n.mgmtTLSRaw != nil {
		lns = append(lns, tls.NewListener(keepOpen{n.mgmtTLSRaw}, n.c.tls.serverConfig))
	}
	for _, ln := range lns {
		n.c.wg.Add(1)
		go func() {
			defer n.c.wg.Done()
			_ = srv.Serve(ln)
		}()
	}
}

// keepOpen lets http.Server.Close stop serving without closing the
// listener, which the node pauses or closes itself.
type keepOpen struct{ net.Listener }

func (keepOpen) Close() error { return nil }

func (n *Node) accept(ln net.Listener) {
	defer n.c.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if n.isRunning() && !errors.Is(err, net.ErrClosed) {
				n.c.logf("mockcluster: node %d: accept: %v", n.id, err)
			}
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		n.adopt(nc)
	}
}

// adopt serves a client connection on its own goroutine (closing it when
// the node does not run).
func (n *Node) adopt(nc net.Conn) {
	cn := newConn(n, nc)
	n.mu.Lock()
	if !n.running {
		n.mu.Unlock()
		nc.Close()
		return
	}
	n.conns[cn] = struct{}{}
	n.c.wg.Add(1)
	n.mu.Unlock()
	go cn.serve()
}

// stop stops accepting and closes every connection, waiting until they
// apply nothing more. final (cluster close, node removal) also gives the
// ports up. Cluster.Close waits for the remaining goroutines.
func (n *Node) stop(final bool) {
	n.mu.Lock()
	if !n.running {
		if final {
			n.pauseOrClose(true)
		}
		n.mu.Unlock()
		return
	}
	n.running, n.serving = false, false
	srv := n.mgmt
	n.mgmt = nil
	if n.down != nil {
		close(n.down)
	}
	// Pausing or closing the listeners ends the accept loops (and the HTTP
	// server's), which srv.Close waits for.
	n.pauseOrClose(final)
	conns := make([]*conn, 0, len(n.conns))
	for cn := range n.conns {
		conns = append(conns, cn)
	}
	n.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	n.handlers.Wait()
	closeConns(conns)
}

// Stop stops the node as a crash would: its connections close and new ones
// are refused until Restart. When Stop returns the node applies nothing
// more, not even requests it had already read. On Linux the node keeps its
// ports bound meanwhile (not listening), so Restart gets them back. The
// cluster's configs still name it (fail it over with Cluster.Failover to
// change that). Its data stays in the cluster.
func (n *Node) Stop() { n.stop(false) }

// Restart starts a stopped node again on the same ports. It fails when the
// cluster is closed, or (on platforms other than Linux) when a port was
// taken meanwhile.
func (n *Node) Restart() error {
	// c.mu is held across listen and serve (c.mu before n.mu, as in New):
	// a Close or RemoveNode racing this one either comes first, and we
	// refuse, or stops the node we started and waits for its goroutines.
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if n.c.closed || n.c.nodes[n.id] != n {
		return ErrClosed
	}
	if err := n.listen(); err != nil {
		return err
	}
	n.serve()
	return nil
}

// DropConnections closes every client connection of the node; it keeps
// listening. When it returns, the closed connections apply nothing more.
func (n *Node) DropConnections() { n.closeConnsWhere(func(*conn) bool { return true }) }

// closeConnsWhere closes the connections pred selects and waits until they
// apply nothing more.
func (n *Node) closeConnsWhere(pred func(*conn) bool) {
	var sel []*conn
	for _, cn := range n.connList() {
		if pred(cn) {
			sel = append(sel, cn)
		}
	}
	closeConns(sel)
}

func (n *Node) connList() []*conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*conn, 0, len(n.conns))
	for cn := range n.conns {
		out = append(out, cn)
	}
	return out
}

func (n *Node) forget(cn *conn) {
	n.mu.Lock()
	delete(n.conns, cn)
	n.mu.Unlock()
}
