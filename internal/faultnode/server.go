package faultnode

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/kvwire/kvwire/memdx"
)

// The credentials a Server accepts unless SetCredentials changes them (the
// same as mockcluster's defaults).
const (
	DefaultUser     = "Administrator"
	DefaultPassword = "password"
)

// Handler is called for every request a Server reads, on the connection's
// goroutine (the connection reads nothing else meanwhile). It answers with
// c.Send or c.Write, or not at all, and returns true; returning false lets
// the Server answer: the bootstrap requests as a node does, anything else
// with UNKNOWN_COMMAND. req is valid only during the call. A handler that
// blocks must return once c.Done() is closed, or Close waits for it.
type Handler func(c *ServerConn, req *memdx.Packet) bool

// TextHandler is called for every line a text connection to a Server
// sends (without its CRLF), on the connection's goroutine, as a Handler is
// for a binary request. It answers with c.Write, or not at all, and
// returns true; returning false lets the Server answer: "version" with
// VERSION, anything else with ERROR.
type TextHandler func(c *ServerConn, line string) bool

// Server impersonates a node on 127.0.0.1. Every method is safe for
// concurrent use.
type Server struct {
	ln      net.Listener
	handler Handler
	text    TextHandler
	wg      sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	conns    map[*ServerConn]struct{}
	features []memdx.HelloFeature
	errMap   []byte
	config   []byte
	user     string
	password string
	requests map[memdx.OpCode]int
}

// NewServer listens on 127.0.0.1 (a port the OS chooses) and serves every
// connection with h (nil: the built-in answers only). Until the Set methods
// say otherwise it grants every HELLO feature asked for, answers
// GET_ERROR_MAP with UNKNOWN_COMMAND, accepts DefaultUser/DefaultPassword
// with PLAIN and SCRAM, selects any bucket, and answers GET_CLUSTER_CONFIG
// with KEY_ENOENT (no config).
func NewServer(h Handler) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnode: listen: %w", err)
	}
	s := &Server{ln: ln, handler: h, conns: map[*ServerConn]struct{}{},
		user: DefaultUser, password: DefaultPassword, requests: map[memdx.OpCode]int{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address clients connect to ("127.0.0.1:port").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SetFeatures sets the HELLO features granted: those asked for that are in
// fs (nil: every feature asked for).
func (s *Server) SetFeatures(fs []memdx.HelloFeature) {
	s.mu.Lock()
	s.features = slices.Clone(fs)
	s.mu.Unlock()
}

// SetErrorMap sets the GET_ERROR_MAP answer (nil: UNKNOWN_COMMAND).
func (s *Server) SetErrorMap(m []byte) {
	s.mu.Lock()
	s.errMap = slices.Clone(m)
	s.mu.Unlock()
}

// SetConfig sets the GET_CLUSTER_CONFIG answer (nil: KEY_ENOENT). As in a
// real node's config, "$HOST" in it stands for the host the client dialed
// (the client substitutes it).
func (s *Server) SetConfig(cfg []byte) {
	s.mu.Lock()
	s.config = slices.Clone(cfg)
	s.mu.Unlock()
}

// SetTextHandler sets the handler of the text connections' lines (nil:
// the built-in answers only). A connection whose first byte is not a
// binary magic is a text connection (memcached's ASCII protocol, as
// memcached decides on the same port).
func (s *Server) SetTextHandler(h TextHandler) {
	s.mu.Lock()
	s.text = h
	s.mu.Unlock()
}

// SetCredentials sets the only user and password SASL accepts.
func (s *Server) SetCredentials(user, password string) {
	s.mu.Lock()
	s.user, s.password = user, password
	s.mu.Unlock()
}

// Requests returns how many requests with opcode op the Server has read.
func (s *Server) Requests(op memdx.OpCode) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[op]
}

// Conns returns the connections open now.
func (s *Server) Conns() []*ServerConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*ServerConn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Close stops accepting, closes every connection and waits for every
// goroutine the Server started (handlers included).
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ln.Close()
	for _, c := range s.Conns() {
		c.Close()
	}
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &ServerConn{s: s, nc: nc, done: make(chan struct{})}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// ServerConn is one connection to a Server.
type ServerConn struct {
	s    *Server
	nc   net.Conn
	done chan struct{}
	once sync.Once
	wmu  sync.Mutex
	// scram is the exchange in progress; only the serve goroutine uses it.
	scram *memdx.ScramServer
}

// Send writes pkts to the client in one write.
func (c *ServerConn) Send(pkts ...memdx.Packet) error {
	b, err := Encode(pkts...)
	if err != nil {
		return err
	}
	return c.Write(b)
}

// Write writes raw bytes to the client (garbage, a packet cut short).
func (c *ServerConn) Write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// Close closes the connection.
func (c *ServerConn) Close() { c.end(false) }

// Reset closes the connection with a TCP RST.
func (c *ServerConn) Reset() { c.end(true) }

// Done is closed once the connection is closed.
func (c *ServerConn) Done() <-chan struct{} { return c.done }

func (c *ServerConn) end(rst bool) {
	c.once.Do(func() {
		close(c.done)
		if rst {
			resetConn(c.nc)
		} else {
			c.nc.Close()
		}
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
}

func (c *ServerConn) serve() {
	defer c.s.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c.nc)
	if first, err := br.Peek(1); err != nil || !memdx.Magic(first[0]).Valid() {
		c.serveText(br)
		return
	}
	r := &packetReader{br}
	for {
		req, _, err := r.next()
		if err != nil {
			return
		}
		c.s.mu.Lock()
		c.s.requests[req.OpCode]++
		c.s.mu.Unlock()
		if c.s.handler != nil && c.s.handler(c, &req) {
			continue
		}
		if c.Send(c.builtin(&req)) != nil {
			return
		}
	}
}

// builtin is the Server's own answer to req.
func (c *ServerConn) builtin(req *memdx.Packet) memdx.Packet {
	s := c.s
	s.mu.Lock()
	features, errMap, config, user, password := s.features, s.errMap, s.config, s.user, s.password
	s.mu.Unlock()
	switch req.OpCode {
	case memdx.OpHello:
		asked, err := memdx.DecodeHelloFeatures(req.Value)
		if err != nil {
			return Reply(req, memdx.StatusInvalidArgs, nil)
		}
		var granted []byte
		for _, f := range asked {
			if features == nil || slices.Contains(features, f) {
				granted = append(granted, byte(f>>8), byte(f))
			}
		}
		return Reply(req, memdx.StatusSuccess, granted)
	case memdx.OpNoop, memdx.OpSelectBucket:
		return Reply(req, memdx.StatusSuccess, nil)
	case memdx.OpVersion:
		return Reply(req, memdx.StatusSuccess, []byte("7.6.2-faultnode"))
	case memdx.OpGetErrorMap:
		if errMap == nil {
			return Reply(req, memdx.StatusUnknownCommand, nil)
		}
		return Reply(req, memdx.StatusSuccess, errMap)
	case memdx.OpGetClusterConfig:
		if config == nil {
			return Reply(req, memdx.StatusKeyNotFound, nil)
		}
		p := Reply(req, memdx.StatusSuccess, config)
		p.Datatype = memdx.DatatypeJSON
		return p
	case memdx.OpSASLListMechs:
		return Reply(req, memdx.StatusSuccess, []byte("SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN"))
	case memdx.OpSASLAuth:
		mech := string(req.Key)
		if mech == memdx.MechPlain {
			_, u, pw, err := memdx.DecodePlainPayload(req.Value)
			if err != nil || u != user || pw != password {
				return Reply(req, memdx.StatusAuthError, nil)
			}
			return Reply(req, memdx.StatusSuccess, nil)
		}
		keys, err := memdx.DeriveScramKeys(mech, password, []byte("faultnode salt"), 4096)
		if err != nil {
			return Reply(req, memdx.StatusAuthError, nil)
		}
		c.scram, err = memdx.NewScramServer(mech, func(u string) (memdx.ScramKeys, bool) { return keys, u == user }, nil)
		if err != nil {
			return Reply(req, memdx.StatusAuthError, nil)
		}
		first, err := c.scram.ServerFirst(req.Value)
		if err != nil {
			return Reply(req, memdx.StatusAuthError, nil)
		}
		return Reply(req, memdx.StatusAuthContinue, first)
	case memdx.OpSASLStep:
		if c.scram == nil {
			return Reply(req, memdx.StatusAuthError, nil)
		}
		final, err := c.scram.ServerFinal(req.Value)
		c.scram = nil
		if err != nil {
			return Reply(req, memdx.StatusAuthError, nil)
		}
		return Reply(req, memdx.StatusSuccess, final)
	}
	return Reply(req, memdx.StatusUnknownCommand, nil)
}

// serveText serves a text connection line by line.
func (c *ServerConn) serveText(br *bufio.Reader) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		c.s.mu.Lock()
		h := c.s.text
		c.s.mu.Unlock()
		if h != nil && h(c, line) {
			continue
		}
		answer := "ERROR\r\n"
		if line == "version" {
			answer = "VERSION 1.6.18-faultnode\r\n"
		}
		if c.Write([]byte(answer)) != nil {
			return
		}
	}
}
