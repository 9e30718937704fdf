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

// Node is one node of the cluster: a KV listener (plus a TLS one with
// Options.TLS) on 127.0.0.1 and a minimal management (HTTP) listener that
// serves the terse bucket configs. Its methods are safe for concurrent use.
type Node struct {
	c  *Cluster
	id int

	// Ports are chosen by the OS at first start and kept across restarts.
	kvPort, tlsPort, mgmtPort int

	// guarded by c.mu
	failedOver bool

	mu      sync.Mutex
	running bool
	ln      net.Listener
	tlsLn   net.Listener
	mgmt    *http.Server
	mgmtLn  net.Listener
	conns   map[*conn]struct{}
	serving bool

	reqs [256]atomic.Uint64

	errMu  sync.Mutex
	errors map[memdx.Status]uint64
}

// ID returns the node's id.
func (n *Node) ID() int { return n.id }

// Addr returns the node's KV address, "127.0.0.1:port".
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.kvPort) }

// TLSAddr returns the node's TLS KV address, or "" without Options.TLS.
func (n *Node) TLSAddr() string {
	if n.tlsPort == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(n.tlsPort)
}

// MgmtAddr returns the node's management (HTTP) address.
func (n *Node) MgmtAddr() string { return "127.0.0.1:" + strconv.Itoa(n.mgmtPort) }

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

// listen opens the node's listeners, on the ports it had before when it
// restarts.
func (n *Node) listen() error {
	listen := func(port int) (net.Listener, int, error) {
		ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return nil, 0, fmt.Errorf("mockcluster: node %d: %w", n.id, err)
		}
		return ln, ln.Addr().(*net.TCPAddr).Port, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return nil
	}
	var err error
	var lns []net.Listener
	fail := func(e error) error {
		for _, l := range lns {
			l.Close()
		}
		return e
	}
	if n.ln, n.kvPort, err = listen(n.kvPort); err != nil {
		return fail(err)
	}
	lns = append(lns, n.ln)
	if n.mgmtLn, n.mgmtPort, err = listen(n.mgmtPort); err != nil {
		return fail(err)
	}
	lns = append(lns, n.mgmtLn)
	if n.c.tls != nil {
		var raw net.Listener
		if raw, n.tlsPort, err = listen(n.tlsPort); err != nil {
			return fail(err)
		}
		n.tlsLn = tls.NewListener(raw, n.c.tls.serverConfig)
	}
	n.running = true
	return nil
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
	n.mgmt = &http.Server{Handler: http.HandlerFunc(n.serveMgmt), ErrorLog: nil}
	n.c.wg.Add(1)
	go func(srv *http.Server, ln net.Listener) {
		defer n.c.wg.Done()
		_ = srv.Serve(ln)
	}(n.mgmt, n.mgmtLn)
}

func (n *Node) accept(ln net.Listener) {
	defer n.c.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
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

// stop closes the listeners and every connection, and waits for nothing:
// Cluster.Close waits for the goroutines.
func (n *Node) stop() {
	n.mu.Lock()
	if !n.running {
		n.mu.Unlock()
		return
	}
	n.running, n.serving = false, false
	n.ln.Close()
	if n.tlsLn != nil {
		n.tlsLn.Close()
	}
	if n.mgmt != nil {
		n.mgmt.Close()
	} else {
		n.mgmtLn.Close()
	}
	n.mgmt = nil
	conns := make([]*conn, 0, len(n.conns))
	for cn := range n.conns {
		conns = append(conns, cn)
	}
	n.mu.Unlock()
	for _, cn := range conns {
		cn.close()
	}
}

// Stop stops the node as a crash would: its listeners and connections
// close, and clients cannot connect until Restart. The cluster's configs
// still name it (fail it over with Cluster.Failover to change that). Its
// data stays in the cluster.
func (n *Node) Stop() { n.stop() }

// Restart starts a stopped node again on the same ports. It fails when a
// port was taken meanwhile or the cluster is closed.
func (n *Node) Restart() error {
	n.c.mu.Lock()
	closed := n.c.closed || n.c.nodes[n.id] != n
	n.c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := n.listen(); err != nil {
		return err
	}
	n.serve()
	return nil
}

// DropConnections closes every client connection of the node; it keeps
// listening.
func (n *Node) DropConnections() { n.closeConnsWhere(func(*conn) bool { return true }) }

func (n *Node) closeConnsWhere(pred func(*conn) bool) {
	for _, cn := range n.connList() {
		if pred(cn) {
			cn.close()
		}
	}
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

// serveMgmt answers the terse config endpoints of the management service:
// GET /pools/default/b/<bucket> and /pools/default/nodeServices, with HTTP
// basic authentication. Everything else is 404.
func (n *Node) serveMgmt(w http.ResponseWriter, r *http.Request) {
	name, pass, ok := r.BasicAuth()
	u := n.c.lookupUser(name)
	if !ok || u == nil || u.password != pass {
		w.Header().Set("WWW-Authenticate", `Basic realm="Couchbase Server Admin / REST"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	const prefix = "/pools/default/b/"
	var body []byte
	switch {
	case r.URL.Path == "/pools/default/nodeServices":
		if g := n.c.global.Load(); g != nil {
			body = g.json[n.id]
		}
	case len(r.URL.Path) > len(prefix) && r.URL.Path[:len(prefix)] == prefix:
		bn := r.URL.Path[len(prefix):]
		b := n.c.Bucket(bn)
		if b == nil || !u.mayUse(bn) {
			http.NotFound(w, r)
			return
		}
		body = b.snap.Load().json[n.id]
	}
	if body == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
