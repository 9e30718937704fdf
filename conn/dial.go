package conn

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/memdx"
)

// Dial connects to addr ("host:port") and bootstraps the connection (see
// the package doc for the sequence). The returned Conn is ready for Do.
//
// Errors: a dial failure is returned as the net error (wrapped), and so is
// a network failure during the TLS handshake (EOF, a reset, a timeout: the
// node went away, which is not TLS's fault), or a node that sent nothing at
// all for Options.ProbeTimeout while the handshake waited for it (matching
// kverr.ErrUnresponsive, as the bootstrap's silence does); a failure after
// connecting matches kverr.ErrBootstrap and is one of *TLSError, *AuthError,
// *BucketAccessError or *BootstrapError. ctx bounds the whole of Dial,
// redials included; it is not kept.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	o := opts.resolved()
	if err := memdx.CheckCredentials(o.Username, o.Password); err != nil {
		return nil, &AuthError{Addr: addr, User: o.Username, Reason: "credentials no SASL mechanism can carry", Err: err}
	}
	if o.Memcached && o.Bucket != "" {
		return nil, &BootstrapError{Addr: addr, Step: memdx.OpSelectBucket,
			Reason: fmt.Sprintf("bucket %q requested, but plain memcached has no buckets", o.Bucket)}
	}
	memcached := o.Memcached
	xerror := true
	var dropped error
	var hungUp *BootstrapError // the last connection's hang-up at SELECT_BUCKET
	for {
		c, err := dialOnce(ctx, addr, &o, memcached, xerror, dropped)
		if err == nil {
			return c, nil
		}
		var be *BootstrapError
		if errors.As(err, &be) && be.selectHangup && ctx.Err() == nil {
			// Without XERROR kv_engine closes the connection where
			// SELECT_BUCKET would answer EACCESS. One hang-up there
			// may be the network's; the same one on the next
			// connection, after a login that succeeded again, is the
			// node's answer.
			if hungUp != nil {
				return nil, &BucketAccessError{Addr: addr, Bucket: o.Bucket, HungUp: be}
			}
			hungUp = be
			o.Logger.Info("the node closed the connection at SELECT_BUCKET; dialing again to tell a refusal from a network fault", "addr", addr, "err", err)
			continue
		}
		var nc *notCouchbaseError
		if !memcached && errors.As(err, &nc) {
			// Plain memcached: it answered HELLO with UNKNOWN_COMMAND (no
			// SASL) or AUTH_ERROR (SASL required before anything else).
			if o.Bucket != "" {
				return nil, &BootstrapError{Addr: addr, Step: memdx.OpHello, Status: nc.status,
					Reason: fmt.Sprintf("the server is plain memcached, which has no buckets, but bucket %q was requested", o.Bucket)}
			}
			switch {
			case nc.status == memdx.StatusUnknownCommand:
				// A memcached with SASL would have refused HELLO with
				// AUTH_ERROR: this one has none, so no password is sent.
				o.Username, o.Password = "", ""
			case o.Username == "":
				return nil, &AuthError{Addr: addr, Status: nc.status,
					Reason: "the server (plain memcached with SASL) requires authentication and no credentials were given"}
			default:
				// The password may go out with PLAIN only if the caller
				// allows PLAIN: anything can answer HELLO with AUTH_ERROR.
				if err := plainRefused(&o, addr); err != nil {
					return nil, err
				}
			}
			o.Logger.Info("server refused HELLO: switching to plain memcached mode", "addr", addr, "status", nc.status)
			memcached = true
			continue
		}
		var cm *corruptMapError
		if xerror && errors.As(err, &cm) {
			// RFC 0013: a map that does not parse is ignored, and the
			// connection made again without XERROR.
			o.Logger.Warn("dropping the node's error map and reconnecting without XERROR", "addr", addr, "err", cm.err)
			dropped = cm.err
			xerror = false
			continue
		}
		return nil, err
	}
}

// plainRefused returns an *AuthError wrapping kverr.ErrPlainAuthRefused when the
// options do not allow SASL PLAIN, the only mechanism plain memcached has:
// it is not among Options.SASLMechanisms, or there is neither TLS nor
// AllowPlainAuthWithoutTLS. It is asked before the password would be
// written, so a refused password never goes out.
func plainRefused(o *Options, addr string) error {
	var reason string
	switch {
	case !slices.Contains(o.SASLMechanisms, memdx.MechPlain):
		reason = fmt.Sprintf("plain memcached offers only SASL PLAIN, which Options.SASLMechanisms (%q) does not allow", o.SASLMechanisms)
	case !o.plainAllowed():
		reason = "plain memcached offers only SASL PLAIN, which would send the password in clear; " +
			"it is sent only over TLS or with Options.AllowPlainAuthWithoutTLS"
	default:
		return nil
	}
	return &AuthError{Addr: addr, User: o.Username, Mechanism: memdx.MechPlain, Reason: reason, Err: kverr.ErrPlainAuthRefused}
}

// notCouchbaseError: HELLO was refused in a way only plain memcached refuses
// it. Internal: Dial switches to memcached mode.
type notCouchbaseError struct{ status memdx.Status }

func (e *notCouchbaseError) Error() string {
	return fmt.Sprintf("conn: server answered HELLO with %s: not a Couchbase node", e.status)
}

func (e *notCouchbaseError) Is(target error) bool { return target == kverr.ErrBootstrap }

// corruptMapError: the error map did not parse. Internal: Dial redials
// without XERROR.
type corruptMapError struct{ err error }

func (e *corruptMapError) Error() string { return "conn: corrupt error map: " + e.err.Error() }
func (e *corruptMapError) Unwrap() error { return e.err }

// mapTooLong returns the decode error when the connection ended on the
// error map's header, its body over Options.MaxBodyLength; nil for any
// other failure. Responses come in order, so the header is the map's when
// the connection ended on it while GET_ERROR_MAP was awaited (before, false:
// the read loop framing the map), or while the step just before it was
// (before, true: checkFollowing, which checks the header after that step's
// answer, found it in the same read).
func mapTooLong(err error, before bool) error {
	var pe *ProtocolError
	var de *memdx.DecodeError
	if errors.As(err, &pe) && pe.following == before && errors.As(pe.Err, &de) && errors.Is(de, memdx.ErrBodyTooLarge) {
		return de
	}
	return nil
}

// dialOnce opens one socket and bootstraps it. dropped is why an earlier
// connection's error map was dropped (xerror is then false).
func dialOnce(ctx context.Context, addr string, o *Options, memcached, xerror bool, dropped error) (*Conn, error) {
	nc, err := dialNet(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	c := newConn(nc, addr, o, newConnID(o.ClientID))
	c.errMapErr = dropped
	if memcached {
		err = c.bootMemcached(ctx)
	} else {
		err = c.bootCouchbase(ctx, xerror)
	}
	if err == nil {
		last := memdx.OpGetClusterConfig
		if memcached {
			last = memdx.OpNoop
		}
		err = c.goLive(last)
	}
	if err != nil {
		c.fail(kverr.ErrConnectionClosed)
		<-c.exited
		return nil, err
	}
	c.log.Debug("connection ready", "memcached", c.memcached, "features", c.features,
		"mechanism", c.mech, "bucket", c.bucket, "version", c.version, "error_map", c.errMap != nil)
	return c, nil
}

func dialNet(ctx context.Context, addr string, o *Options) (net.Conn, error) {
	nc, err := connect(ctx, addr, o)
	if err != nil {
		return nil, fmt.Errorf("conn %s: dial: %w", addr, err)
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		if err := tcp.SetNoDelay(true); err != nil {
			nc.Close()
			return nil, fmt.Errorf("conn %s: TCP_NODELAY: %w", addr, err)
		}
	}
	if o.TLSConfig == nil {
		return nc, nil
	}
	cfg := o.TLSConfig.Clone()
	// One Write, one record: the writer cuts its writes at request
	// boundaries into records a server reads whole (recordChunk).
	cfg.DynamicRecordSizingDisabled = true
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	wc := &watchedConn{Conn: nc, raw: newRawWriter(nc)}
	tc := tls.Client(wc, cfg)
	wc.watching = true // counted for handshake's silence watch and plainPortHint
	err = handshake(ctx, tc, wc, addr, o)
	wc.watching = false
	if err != nil {
		nc.Close()
		if errors.Is(err, kverr.ErrUnresponsive) {
			return nil, fmt.Errorf("conn %s: TLS handshake: %w", addr, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("conn %s: TLS handshake: %w", addr, ctx.Err())
		}
		hint := plainPortHint(addr, o, err, wc.in.Load())
		if !IsTLSFailure(err) {
			if hint != "" {
				return nil, fmt.Errorf("conn %s: TLS handshake: %w (%s)", addr, err, hint)
			}
			return nil, fmt.Errorf("conn %s: TLS handshake: %w", addr, err)
		}
		return nil, &TLSError{Addr: addr, Err: err, Hint: hint}
	}
	return tc, nil
}

// plainPortHint says what a failed TLS handshake to addr suggests, having
// received in bytes: a first record that is no TLS record (the peer
// answered the ClientHello in another protocol) is a port without TLS;
// the connection closed before a byte arrived, at port 11210, Couchbase's
// plain KV port, likely is too (kv_engine drops a connection whose first
// bytes carry no valid magic, as a ClientHello's do). "": neither.
func plainPortHint(addr string, o *Options, err error, in uint64) string {
	plain := "couchbase://"
	if o.Memcached {
		plain = "memcached://"
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		return "the server does not speak TLS: not a TLS port: use " + plain + " for a plain port"
	}
	_, port, _ := net.SplitHostPort(addr)
	if in == 0 && !o.Memcached && port == "11210" && !IsTLSFailure(err) {
		return "the server closed without answering the TLS handshake: port 11210 is Couchbase's plain KV port: use couchbase:// for it"
	}
	return ""
}

// portHint says, for a connection without TLS that failed before any
// packet arrived, what its server sent suggests (" (...)", or ""): a TLS
// record (content type alert 0x15 or handshake 0x16, version 3.x) is a
// TLS listener's answer to the plaintext HELLO (crypto/tls and OpenSSL
// send a fatal alert and close); an HTTP status line is an HTTP server's
// (the cluster manager's port, given as a KV port); nothing at all, from
// port 11207, Couchbase's KV TLS port, likely is a TLS listener that
// closed without the alert. Called by the reader, which holds the buffer.
func (c *Conn) portHint() string {
	rd := &c.reader
	if c.opts.TLSConfig != nil || rd.r != 0 || rd.bytesIn.Load() != uint64(rd.w) {
		return "" // TLS, or a packet was read: the server speaks memcached
	}
	secure := "couchbases://"
	if c.opts.Memcached {
		secure = "memcacheds://"
	}
	b := rd.buf[:rd.w]
	if len(b) >= 2 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03 {
		return " (the server answered with a TLS record: this looks like a TLS port: use " + secure + ")"
	}
	if bytes.HasPrefix(b, []byte("HTTP/")) {
		if c.opts.Memcached {
			return " (the server answered in HTTP: this is no memcached port)"
		}
		return " (the server answered in HTTP: this looks like the cluster manager's port: give the KV port (11210)," +
			" or write " + c.addr + "=http to read the config over HTTP)"
	}
	if _, port, _ := net.SplitHostPort(c.addr); len(b) == 0 && !c.opts.Memcached && port == "11207" {
		return " (the server closed without a byte: port 11207 is Couchbase's KV TLS port: use couchbases:// for it)"
	}
	return ""
}

// watchedConn is the socket under a TLS connection: during the handshake
// it counts the bytes read, for the silence watch (handshake). watching is
// set before the handshake and cleared after it, on Dial's goroutine,
// before any other goroutine reads the connection.
//
// It also counts the bytes the socket takes (out), for the health check
// (monitor.go): the TLS layer's Write returns only once the socket took
// the whole chunk the writer handed it (up to writeChunk), so while it
// waits on a full socket, what the node drains and the socket takes again
// is visible only here. A TCP socket is written through raw (on unix),
// one system call at a time, each counted as it returns (as net.Conn's
// Write would make them: it waits in the poller for room); elsewhere, and
// on another connection type (a DialContext's own), each Write is counted
// as it returns, which the TLS layer makes per record (at most 16 KiB of
// data).
type watchedConn struct {
	net.Conn
	watching bool
	in       atomic.Uint64
	out      atomic.Uint64
	raw      rawWriter // nil: not a TCP socket (or not on unix)
	// closing: Close is closing the TLS connection; its Writes (the
	// close_notify alert) write only what the socket takes at once.
	closing atomic.Bool
}

// errWouldWait: a Write while closing that the socket cannot take at
// once, or on a connection that cannot be written without waiting.
var errWouldWait = errors.New("the TLS close_notify alert is not sent: the socket would make Close wait")

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.watching {
		c.in.Add(uint64(n))
	}
	return n, err
}

// Write writes all of b, counting what the socket takes as it takes it.
// The TLS layer's Writes are sequential (its output lock), as the raw
// writer needs.
func (c *watchedConn) Write(b []byte) (int, error) {
	if c.closing.Load() {
		return c.writeClosing(b)
	}
	if c.raw == nil {
		n, err := c.Conn.Write(b)
		c.out.Add(uint64(n))
		return n, err
	}
	n := 0
	for n < len(b) {
		m, err := c.raw.writeNet(b[n:])
		n += m
		c.out.Add(uint64(m))
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.ErrShortWrite
		}
	}
	return n, nil
}

// writeClosing is a Write made as Close closes the TLS connection (its
// close_notify alert): it writes what the socket takes at once. crypto/tls
// waits to send the alert up to 5 s of real time (on a connection that
// ignores write deadlines, until the node reads), and a node that stopped
// reading would hold Close that long. A connection other than a TCP socket
// (raw nil) cannot be written without the risk of waiting: nothing is
// written. The socket is closed right after either way.
func (c *watchedConn) writeClosing(b []byte) (int, error) {
	if c.raw == nil {
		return 0, errWouldWait
	}
	n, err := c.raw.tryWrite(b)
	c.out.Add(uint64(n))
	if err == nil && n < len(b) {
		err = errWouldWait
	}
	if errors.Is(err, errWouldBlock) {
		err = errWouldWait
	}
	return n, err
}

// closeNet closes nc; over TLS, the close_notify alert is sent only if the
// socket takes it at once (writeClosing). An alert left unsent so is no
// error of the Close: the connection is closed as asked.
func closeNet(nc net.Conn) error {
	if tc, ok := nc.(*tls.Conn); ok {
		if wc, ok := tc.NetConn().(*watchedConn); ok {
			wc.closing.Store(true)
		}
	}
	if err := nc.Close(); !errors.Is(err, errWouldWait) {
		return err
	}
	return nil
}

// underlyingConn returns the connection under a TLS one (the socket Dial
// opened), or nc itself.
func underlyingConn(nc net.Conn) net.Conn {
	for {
		switch c := nc.(type) {
		case *tls.Conn:
			nc = c.NetConn()
		case *watchedConn:
			nc = c.Conn
		default:
			return nc
		}
	}
}

// handshake runs tc's TLS handshake, bounded by ctx and, unless the health
// check is off (a negative ProbeAfter), by the bootstrap's silence watch
// (monitor.go): a node that sends nothing for ProbeTimeout after the
// connection is made ends the handshake with kverr.ErrUnresponsive.
// A paused node's kernel still accepts connections, so without the watch
// such a node would hold a TLS Dial for all of ctx, where a plain one
// fails after ProbeTimeout. The watch ends once the node has sent anything:
// it is alive, and ctx bounds the rest of the handshake.
func handshake(ctx context.Context, tc *tls.Conn, wc *watchedConn, addr string, o *Options) error {
	if o.ProbeAfter < 0 {
		return tc.HandshakeContext(ctx)
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tm := o.clock.NewTimer()
	tm.Reset(o.ProbeTimeout)
	wc.watching = true
	stop, silent := make(chan struct{}), make(chan struct{})
	watched := make(chan struct{})
	lifecycle.Go(func() {
		defer close(watched)
		select {
		case <-stop:
		case <-tm.C():
			if in := wc.in.Load(); in != 0 {
				o.Logger.Debug("the node answered: the TLS handshake's silence watch ends", "addr", addr, "first_bytes", in)
				return
			}
			close(silent)
			cancel()
		}
	})
	err := tc.HandshakeContext(hctx)
	close(stop)
	<-watched
	tm.Stop()
	wc.watching = false
	if err == nil {
		return nil
	}
	select {
	case <-silent:
		return fmt.Errorf("%w: nothing arrived for %v while the handshake waited for the node", kverr.ErrUnresponsive, o.ProbeTimeout)
	default:
		return err
	}
}

// IsTLSFailure reports whether a handshake error is TLS's own (RFC 0049
// TLS_ERROR, which fails fast) rather than the network's (the node went
// away, which a retry may get past); Dial returns the former as a
// *TLSError, and so does the cluster manager's HTTPS client
// (internal/httpconfig):
//
//   - TLS: an alert from the server or one crypto/tls sent about the
//     server's messages (a *net.OpError whose Op is "remote error" or
//     "local error"), a certificate that did not
//     verify (*tls.CertificateVerificationError, x509 errors), a peer that
//     does not speak TLS (tls.RecordHeaderError), and crypto/tls's own
//     refusals (no common version or cipher suite, a malformed handshake
//     message), which are plain errors.
//   - Network: EOF, a closed pipe or connection, a timeout, and any other
//     net.Error from the socket (a reset is a *net.OpError).
func IsTLSFailure(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error") {
		// An alert from the server, or one crypto/tls sent it: a
		// malformed or unexpected handshake message, a bad record MAC.
		return true
	}
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var roots x509.SystemRootsError
	if errors.As(err, &alert) || errors.As(err, &verify) || errors.As(err, &header) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &roots) {
		return true
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.ErrClosedPipe),
		errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne):
		return false
	}
	return true
}

// newConnID returns a connection id: 16 random hex digits, after
// "clientID/" when there is a client id (Options.ClientID).
func newConnID(clientID string) string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read never fails
	id := hex.EncodeToString(b[:])
	if clientID != "" {
		return clientID + "/" + id
	}
	return id
}

// helloPad is the size of a padding request (padRequest): the HELLO key is
// padded to a multiple of it (see helloKey).
const helloPad = memdx.HeaderSize

// padRequest is the request that pads HELLO (see helloKey): 24 bytes, no
// key, extras or body. SASL_LIST_MECHS rather than NOOP: kv_engine (7.x,
// Cookie::validate) answers NOOP EACCESS before a login, a refusal the
// node counts for every connection, and runs SASL_LIST_MECHS, which
// carries no secret.
func padRequest() memdx.Request { return memdx.NewSASLListMechs() }

// helloKey returns the HELLO key (memdx.HelloKey) padded with JSON
// whitespace to a multiple of 24 bytes, and the number of padding requests
// (padRequest) that must follow HELLO in the same write.
//
// Why: plain memcached (measured: 1.6.18) answers an unknown opcode such as
// HELLO with UNKNOWN_COMMAND but then skips key-length more bytes than the
// body holds, and sends that answer only once it has skipped them. A HELLO
// with a key followed by padding requests totalling exactly the key's
// length keeps such a server in step: it swallows the padding, answers
// HELLO, and reads what follows as the requests they are. Couchbase
// answers the padding requests.
func helloKey(agent, id string) ([]byte, int) {
	key := memdx.HelloKey(agent, id)
	if len(key) > 240 { // escaping blew up a long agent: keep the key a valid size
		key = memdx.HelloKey(DefaultClientName, id)
	}
	if rem := len(key) % helloPad; rem != 0 {
		key = append(key, strings.Repeat(" ", helloPad-rem)...)
	}
	return key, len(key) / helloPad
}

// step is one bootstrap request: its call and a copy of its response.
type step struct {
	op     memdx.OpCode
	cl     *call
	err    error // the request never went out (connection ended)
	status memdx.Status
	dt     memdx.Datatype
	value  []byte
}

func (s *step) handle(p *memdx.Packet) error {
	s.status = p.Status
	s.dt = p.Datatype
	s.value = append([]byte(nil), p.Value...)
	return nil
}

// send queues a bootstrap request. It does not count against
// Options.MaxPending: the first bootstrap write alone holds up to 13
// requests (HELLO, its padding, GET_ERROR_MAP, SASL_LIST_MECHS), and
// plain memcached answers HELLO only once it has read all the padding.
func (c *Conn) send(req memdx.Request) *step {
	s := &step{op: req.OpCode}
	s.cl, s.err = c.start(&req, s.handle, time.Time{}, time.Time{}, nil, false, false)
	return s
}

// await waits for a bootstrap request's response. An error means there was
// none: the connection ended or ctx did.
func (c *Conn) await(ctx context.Context, s *step) error {
	if s.err == nil && s.cl != nil {
		_, s.err = c.wait(ctx, time.Time{}, s.cl)
		s.cl = nil
	}
	if s.err != nil {
		reason := "no response"
		cause := c.hangupCause(s)
		if cause != "" {
			reason = cause
		}
		return &BootstrapError{Addr: c.addr, Step: s.op, Reason: reason, Err: s.err,
			selectHangup: cause != "" && s.op == memdx.OpSelectBucket}
	}
	return nil
}

// hangupCause says what it most likely means that the server closed the
// connection instead of answering bootstrap step s, "" when there is
// nothing to say beyond the step. kv_engine cannot tell a connection that
// did not negotiate XERROR NO_BUCKET or EACCESS: Connection::remapErrorCode
// turns both into a disconnect. So a Couchbase node hangs up on such a
// connection's SELECT_BUCKET of a bucket the user may not use (EACCESS,
// also when the bucket does not exist: access is checked first), its
// GET_CLUSTER_CONFIG without a bucket by a user without SystemSettings
// (EACCESS), and a memcached-mode connection's get (NO_BUCKET: no HELLO,
// no bucket). The server gave no status, so the cause is a likelihood,
// worded so.
func (c *Conn) hangupCause(s *step) string {
	if c.features.Has(memdx.FeatureXerror) || !peerHungUp(s.err) {
		return ""
	}
	const closed = "the server closed the connection instead of answering"
	o := &c.opts
	why := ""
	if c.errMapErr != nil {
		why = fmt.Sprintf(" (kvwire dialled again without XERROR: the node's error map was unusable: %v)", c.errMapErr)
	}
	switch {
	case s.op == memdx.OpSelectBucket && o.Username != "":
		return fmt.Sprintf("%s; Couchbase Server does that where it would answer EACCESS, to a connection without XERROR%s:"+
			" most likely user %q may not use bucket %q, or no such bucket exists", closed, why, o.Username, o.Bucket)
	case s.op == memdx.OpGetClusterConfig && o.Bucket == "" && o.Username != "":
		return fmt.Sprintf("%s; Couchbase Server does that where it would answer EACCESS, to a connection without XERROR%s:"+
			" most likely user %q may not read the cluster config without a bucket (it needs the SystemSettings privilege)",
			closed, why, o.Username)
	case s.op == memdx.OpGet && c.memcached && c.mech != "":
		return fmt.Sprintf("%s a get after the login succeeded; Couchbase Server's KV service does that where it would answer NO_BUCKET,"+
			" to a client without XERROR (memcached mode sends no HELLO) that selected no bucket, and memcached answers a get:"+
			" if %s is a Couchbase node, connect with couchbase://%s/BUCKET", closed, c.addr, c.addr)
	}
	return ""
}

// liveHangupHint is what the reader adds to the error of a live
// connection that the peer closed, when kv_engine may have closed it to
// refuse a request in flight: a Couchbase connection without XERROR, to
// which Connection::remapErrorCode gives a disconnect for the statuses
// below (the full list holds more that kvwire never asks for: range-scan
// and DCP statuses). A node going down closes a connection too, so the
// hint says "may". "" otherwise, and before the bootstrap completed
// (hangupCause speaks for a step).
func (c *Conn) liveHangupHint(err error) string {
	c.mu.Lock()
	live := c.callbacks.live // features and errMapErr were set before it
	c.mu.Unlock()
	if !live || c.memcached || c.features.Has(memdx.FeatureXerror) || !peerHungUp(err) {
		return ""
	}
	why := ""
	if c.errMapErr != nil {
		why = fmt.Sprintf("; it has none because the node's error map was unusable: %v", c.errMapErr)
	}
	return " (the node closed the connection: on a connection without XERROR, as this one is, Couchbase Server does that" +
		" instead of answering EACCESS, NO_BUCKET, AUTH_STALE, DURABILITY_IMPOSSIBLE or SYNC_WRITE_AMBIGUOUS," +
		" so a request in flight may have been refused so" + why + ")"
}

// peerHungUp reports whether err is the connection ending because the
// peer closed it (an EOF, or a reset: a server that closes with requests
// unread in its socket makes the kernel send a reset).
func peerHungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func (c *Conn) stepError(s *step, reason string) error {
	e := &BootstrapError{Addr: c.addr, Step: s.op, Status: s.status, Reason: reason}
	if ec, ok := memdx.DecodeErrorContext(s.dt, s.value); ok && ec.Context != "" {
		e.Reason += ": " + ec.Context
	}
	return e
}

// bootCouchbase runs the Couchbase bootstrap:
//
//	write 1: HELLO, padding (SASL_LIST_MECHS), [GET_ERROR_MAP], [SASL_LIST_MECHS]
//	write 2: SASL_AUTH (SCRAM first message)                        (SCRAM only)
//	write 3: SASL_AUTH PLAIN or SASL_STEP, VERSION, [SELECT_BUCKET], [GET_CLUSTER_CONFIG]
//
// Without credentials the last write is VERSION, SELECT_BUCKET and
// GET_CLUSTER_CONFIG. GET_CLUSTER_CONFIG is left out with
// Options.NoClusterConfig. GET_ERROR_MAP is sent only when XERROR is asked
// for (xerror false: the redial after a corrupt map).
// Every request after HELLO in the first write has neither key nor extras,
// so plain memcached reads them in step (see helloKey).
//
// Before a login, kv_engine (7.x, Cookie::validate) runs only HELLO,
// SASL_LIST_MECHS, SASL_AUTH, SASL_STEP and GET_ERROR_MAP, and answers
// everything else EACCESS, leaving the connection open: the first write
// holds nothing else (the padding is SASL_LIST_MECHS, whose answers are
// only awaited), and VERSION goes behind the last SASL message.
//
// It is one function, longer than most, because it is one pipeline: each
// step's request is sent before the answers of the steps before it are
// read, and read in the order above; split into functions, that order would
// have to be followed across them.
func (c *Conn) bootCouchbase(ctx context.Context, xerror bool) error {
	o := &c.opts
	features := slices.Clone(o.Features)
	if xerror && !slices.Contains(features, memdx.FeatureXerror) {
		features = append(features, memdx.FeatureXerror)
	}
	if !xerror {
		features = slices.DeleteFunc(features, func(f memdx.HelloFeature) bool { return f == memdx.FeatureXerror })
	}
	key, pads := helloKey(o.ClientName, c.id)
	auth := o.Username != ""

	c.cork()
	hello := c.send(memdx.NewHello(key, features))
	padding := make([]*step, pads)
	for i := range padding {
		padding[i] = c.send(padRequest())
	}
	var emap *step
	if xerror { // without XERROR no map is asked for, and none is used
		emap = c.send(memdx.NewGetErrorMap(o.errorMapVersion))
	}
	var mechs *step
	if auth {
		mechs = c.send(memdx.NewSASLListMechs())
	}
	c.uncork()
	// tooLong is the error of a Dial whose map is over MaxBodyLength: it
	// redials without XERROR.
	tooLong := func(de error) error {
		return &corruptMapError{err: fmt.Errorf("the GET_ERROR_MAP response is over Options.MaxBodyLength (%d bytes): %w", o.MaxBodyLength, de)}
	}
	// beforeMap is the step answered just before the map.
	beforeMap := hello
	if len(padding) > 0 {
		beforeMap = padding[len(padding)-1]
	}
	awaitStep := func(s *step) error {
		err := c.await(ctx, s)
		if de := mapTooLong(err, true); de != nil && emap != nil && s == beforeMap {
			return tooLong(de)
		}
		return err
	}

	if err := awaitStep(hello); err != nil {
		return err
	}
	switch hello.status {
	case memdx.StatusSuccess:
	case memdx.StatusUnknownCommand, memdx.StatusAuthError:
		return &notCouchbaseError{status: hello.status}
	default:
		return c.stepError(hello, "server refused HELLO")
	}
	granted, err := memdx.DecodeHelloFeatures(hello.value)
	if err != nil {
		return &BootstrapError{Addr: c.addr, Step: memdx.OpHello, Reason: "bad feature list", Err: err}
	}
	c.features = newFeatures(granted)
	// The padding's answers are only awaited, whatever their status: the
	// mechanisms Dial chooses from are those of the SASL_LIST_MECHS sent
	// with a Username, after GET_ERROR_MAP.
	for _, s := range padding {
		if err := awaitStep(s); err != nil {
			return err
		}
	}
	if emap != nil {
		if err := c.await(ctx, emap); err != nil {
			if de := mapTooLong(err, false); de != nil {
				return tooLong(de)
			}
			return err
		}
	}
	// A node that grants XERROR unasked (the redial after a corrupt map)
	// gets no map asked of it: a second corrupt one cannot end the Dial.
	if emap != nil && c.features.Has(memdx.FeatureXerror) {
		if emap.status != memdx.StatusSuccess {
			c.log.Warn("server granted XERROR but refused GET_ERROR_MAP; going on without an error map", "status", emap.status)
		} else {
			m, err := errmap.Parse(emap.value)
			if err != nil {
				return &corruptMapError{err: err}
			}
			c.errMap = m
		}
	}

	// The last write: the final SASL message (if any), then the version,
	// the bucket and the config, pipelined behind it.
	var version, sel, cfg *step
	tail := func() {
		version = c.send(memdx.NewVersion())
		if o.Bucket != "" {
			sel = c.send(memdx.NewSelectBucket(o.Bucket))
		}
		if !o.NoClusterConfig {
			cfg = c.send(memdx.NewGetClusterConfig())
		}
	}
	if auth {
		if err := c.await(ctx, mechs); err != nil {
			return err
		}
		if mechs.status != memdx.StatusSuccess {
			return c.stepError(mechs, "server refused to list SASL mechanisms")
		}
		mech, ok := chooseMechanism(o, memdx.DecodeSASLMechanisms(mechs.value))
		if !ok {
			return &AuthError{Addr: c.addr, User: o.Username,
				Reason: fmt.Sprintf("no SASL mechanism both sides allow: the server offers %q, the client allows %q", mechs.value, allowedMechanisms(o))}
		}
		if err := c.authenticate(ctx, mech, tail); err != nil {
			return err
		}
	} else {
		c.cork()
		tail()
		c.uncork()
	}
	if err := c.await(ctx, version); err != nil {
		return err
	}
	if version.status == memdx.StatusSuccess {
		c.version = string(version.value)
	}
	if sel != nil {
		if err := c.await(ctx, sel); err != nil {
			return err
		}
		switch sel.status {
		case memdx.StatusSuccess:
			c.bucket = o.Bucket
		case memdx.StatusNoAccess, memdx.StatusKeyNotFound:
			return &BucketAccessError{Addr: c.addr, Bucket: o.Bucket, Status: sel.status,
				NoLogin: !auth && sel.status == memdx.StatusNoAccess}
		default:
			return c.stepError(sel, fmt.Sprintf("server refused to select bucket %q", o.Bucket))
		}
	}
	if cfg == nil {
		return nil
	}
	if err := c.await(ctx, cfg); err != nil {
		return err
	}
	c.configStatus = cfg.status
	if cfg.status == memdx.StatusSuccess {
		conf := cfg.value
		if cfg.dt.Has(memdx.DatatypeSnappy) {
			conf, err = memdx.DecompressSnappy(nil, conf, int(o.MaxBodyLength))
			if err != nil {
				return &BootstrapError{Addr: c.addr, Step: memdx.OpGetClusterConfig, Reason: "bad snappy config", Err: err}
			}
		}
		c.config = conf
	} else {
		c.log.Debug("no cluster config from the node", "status", cfg.status)
	}
	return nil
}

// allowedMechanisms returns the mechanisms the client accepts, in order.
func allowedMechanisms(o *Options) []string {
	var out []string
	for _, m := range o.SASLMechanisms {
		if m == memdx.MechPlain && !o.plainAllowed() {
			continue
		}
		if m == memdx.MechPlain || memdx.ScramHash(m) != nil {
			out = append(out, m)
		}
	}
	return out
}

// chooseMechanism returns the client's most preferred mechanism the server
// offers.
func chooseMechanism(o *Options, offered []string) (string, bool) {
	for _, m := range allowedMechanisms(o) {
		if slices.Contains(offered, m) {
			return m, true
		}
	}
	return "", false
}

// authenticate runs SASL with mech; tail queues the requests to pipeline
// behind the last SASL message.
func (c *Conn) authenticate(ctx context.Context, mech string, tail func()) error {
	o := &c.opts
	authErr := func(s *step, reason string, err error) error {
		return &AuthError{Addr: c.addr, User: o.Username, Mechanism: mech, Status: s.status, Reason: reason, Err: err}
	}
	if mech == memdx.MechPlain {
		c.cork()
		s := c.send(memdx.NewSASLAuth(mech, memdx.PlainPayload(o.Username, o.Password)))
		tail()
		c.uncork()
		if err := c.await(ctx, s); err != nil {
			return err
		}
		switch s.status {
		case memdx.StatusSuccess:
			c.mech = mech
			return nil
		case memdx.StatusAuthError:
			return authErr(s, "the server refused the credentials", nil)
		}
		return c.stepError(s, "SASL PLAIN failed")
	}

	sc, err := memdx.NewScramClient(mech, o.Username, o.Password, nil)
	if err != nil { // not a refusal: the mechanism and credentials were checked
		return &BootstrapError{Addr: c.addr, Step: memdx.OpSASLAuth, Reason: "cannot start " + mech, Err: err}
	}
	first := c.send(memdx.NewSASLAuth(mech, sc.ClientFirst()))
	if err := c.await(ctx, first); err != nil {
		return err
	}
	switch first.status {
	case memdx.StatusAuthContinue:
	case memdx.StatusAuthError:
		return authErr(first, "the server refused the credentials", nil)
	default:
		return c.stepError(first, "SASL_AUTH failed")
	}
	final, err := sc.ClientFinal(first.value)
	if err != nil {
		return c.scramError(first, mech, "server-first", err)
	}
	c.cork()
	s := c.send(memdx.NewSASLStep(mech, final))
	tail()
	c.uncork()
	if err := c.await(ctx, s); err != nil {
		return err
	}
	switch s.status {
	case memdx.StatusSuccess:
	case memdx.StatusAuthError:
		return authErr(s, "the server refused the credentials", nil)
	default:
		return c.stepError(s, "SASL_STEP failed")
	}
	if err := sc.VerifyServerFinal(s.value); err != nil {
		return c.scramError(s, mech, "server-final", err)
	}
	c.mech = mech
	return nil
}

// scramError reports a SCRAM message from the server that the client could not
// accept. An explicit refusal (an e= attribute) or a server signature that does
// not verify (kverr.ErrAuthenticationFailure) is an *AuthError; a malformed
// message is a protocol problem, not a refusal of the credentials, and is a
// *BootstrapError naming the message.
func (c *Conn) scramError(s *step, mech, msg string, err error) error {
	if errors.Is(err, kverr.ErrAuthenticationFailure) {
		return &AuthError{Addr: c.addr, User: c.opts.Username, Mechanism: mech,
			Reason: "the server's SCRAM " + msg + " message refused the credentials or did not prove the server knows the password", Err: err}
	}
	return &BootstrapError{Addr: c.addr, Step: s.op, Status: s.status,
		Reason: fmt.Sprintf("malformed %s %s message", mech, msg), Err: err}
}

// bootMemcached runs the plain memcached bootstrap:
//
//	SASL_LIST_MECHS                       (only with a Username)
//	[SASL_AUTH PLAIN], VERSION, GET, NOOP
//
// A Username is used only if the server has SASL. One that answers
// SASL_LIST_MECHS with UNKNOWN_COMMAND (memcached started without -S) has
// nothing to log in to: the connection goes on unauthenticated and the
// password is never sent, as libmemcached treats a server without SASL
// (libmemcached/sasl.cc, memcached_sasl_authenticate_connection). A
// server that lists mechanisms gets the password with PLAIN only when
// PLAIN is allowed (plainRefused); otherwise Dial fails with an *AuthError
// and nothing but SASL_LIST_MECHS was sent. VERSION needs no
// authentication in memcached; GET and NOOP do, so a server that requires
// SASL refuses the GET (and closes the connection) when no credentials were
// given, which Dial reports as an *AuthError. The GET of memcachedProbeKey, and
// the mechanisms listed, tell memcached from Couchbase Server's KV service
// (a *NotMemcachedError); so does EACCESS, a status memcached does not
// have, which kv_engine answers to VERSION, GET and NOOP before a login.
func (c *Conn) bootMemcached(ctx context.Context) error {
	o := &c.opts
	c.memcached = true
	login, err := c.memcachedLogin(ctx)
	if err != nil {
		return err
	}
	var auth *step
	c.cork()
	if login {
		auth = c.send(memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload(o.Username, o.Password)))
	}
	version := c.send(memdx.NewVersion())
	// A get without a bucket: memcached answers it (a miss, most likely),
	// Couchbase Server's KV service refuses it (NO_BUCKET, or EACCESS
	// before a login).
	probe := c.send(memdx.NewGet([]byte(memcachedProbeKey)))
	noop := c.send(memdx.NewNoop())
	c.uncork()
	if auth != nil {
		if err := c.await(ctx, auth); err != nil {
			return err
		}
		switch auth.status {
		case memdx.StatusSuccess:
			c.mech = memdx.MechPlain
		case memdx.StatusAuthError:
			return &AuthError{Addr: c.addr, User: o.Username, Mechanism: memdx.MechPlain, Status: auth.status,
				Reason: "the server refused the credentials"}
		default:
			return c.stepError(auth, "SASL PLAIN failed")
		}
	}
	if err := c.await(ctx, version); err != nil {
		return err
	}
	if version.status == memdx.StatusSuccess {
		c.version = string(version.value)
	}
	if err := c.await(ctx, probe); err != nil {
		return err
	}
	if probe.status == memdx.StatusAuthError {
		// memcached closes the connection after refusing it.
		return &AuthError{Addr: c.addr, Status: probe.status,
			Reason: "the server requires authentication and no credentials were given"}
	}
	// memcached has no EACCESS (0x24): it answers AUTH_ERROR. kv_engine
	// answers EACCESS to all three before a login.
	switch {
	case probe.status == memdx.StatusNoBucket:
		return &NotMemcachedError{Addr: c.addr, Evidence: "it answers NO_BUCKET to a get, as Couchbase Server's KV service does on a connection that selected no bucket"}
	case probe.status == memdx.StatusNoAccess:
		return &NotMemcachedError{Addr: c.addr, Evidence: "it answers EACCESS to a get, as Couchbase Server's KV service does on a connection that has not logged in"}
	case version.status == memdx.StatusNoAccess:
		return &NotMemcachedError{Addr: c.addr, Evidence: "it answers EACCESS to VERSION, as Couchbase Server's KV service does on a connection that has not logged in"}
	}
	if err := c.await(ctx, noop); err != nil {
		return err
	}
	switch noop.status {
	case memdx.StatusSuccess:
	case memdx.StatusAuthError:
		return &AuthError{Addr: c.addr, Status: noop.status,
			Reason: "the server requires authentication and no credentials were given"}
	case memdx.StatusNoAccess:
		return &NotMemcachedError{Addr: c.addr, Evidence: "it answers EACCESS to NOOP, as Couchbase Server's KV service does on a connection that has not logged in"}
	default:
		return c.stepError(noop, "server refused NOOP")
	}
	return nil
}

// memcachedLogin decides whether a memcached-mode bootstrap logs in: only
// with a Username, and only to a server that has SASL (PLAIN allowed). A
// server that lists kv_engine's mechanisms is not memcached; one that
// lists mechanisms without PLAIN is an *AuthError (no common mechanism).
func (c *Conn) memcachedLogin(ctx context.Context) (bool, error) {
	o := &c.opts
	if o.Username == "" {
		return false, nil
	}
	hasSASL, mechs, err := c.memcachedHasSASL(ctx)
	if err != nil {
		return false, err
	}
	if m := couchbaseMechanism(mechs); m != "" {
		return false, &NotMemcachedError{Addr: c.addr, Evidence: "it offers SASL " + m + ", as Couchbase Server does and memcached does not"}
	}
	if !hasSASL {
		c.log.Info("server has no SASL (it does not know SASL_LIST_MECHS): going on unauthenticated; the password is not sent",
			"user", o.Username)
		return false, nil
	}
	if len(mechs) > 0 && !slices.Contains(mechs, memdx.MechPlain) {
		// It would refuse PLAIN as it refuses a wrong password.
		return false, &AuthError{Addr: c.addr, User: o.Username,
			Reason: fmt.Sprintf("the server offers SASL %q, and PLAIN, the only mechanism kvwire uses with memcached, is not among them", mechs)}
	}
	if err := plainRefused(o, c.addr); err != nil {
		return false, err
	}
	return true, nil
}

// memcachedProbeKey is the key of the get a memcached-mode bootstrap sends
// to tell memcached from Couchbase Server's KV service.
const memcachedProbeKey = "kvwire:memcached-probe"

// couchbaseMechanism returns the first of mechs that only Couchbase
// Server's KV service names so (kv_engine's SCRAM-SHA512, SCRAM-SHA256,
// SCRAM-SHA1; Cyrus SASL, which memcached uses, writes SCRAM-SHA-1), or "".
func couchbaseMechanism(mechs []string) string {
	for _, m := range mechs {
		if memdx.ScramHash(m) != nil {
			return m
		}
	}
	return ""
}

// NotMemcachedError is a memcached-mode Dial (memcached://) that reached a
// Couchbase Server node's KV port: it would refuse every data request
// (NO_BUCKET), having no bucket selected. Evidence says what gave it away.
type NotMemcachedError struct {
	Addr     string
	Evidence string
}

func (e *NotMemcachedError) Error() string {
	return fmt.Sprintf("conn %s: a Couchbase Server KV port, not memcached: %s; connect with couchbase://%s/BUCKET to use its buckets",
		e.Addr, e.Evidence, e.Addr)
}

// Is makes errors.Is(err, kverr.ErrBootstrap) true.
func (e *NotMemcachedError) Is(target error) bool { return target == kverr.ErrBootstrap }

// memcachedHasSASL asks a memcached server for its SASL mechanisms (the
// list, when it gave one), which carries no secret. UNKNOWN_COMMAND (and
// NOT_SUPPORTED) mean it has no SASL; a list, or AUTH_ERROR, that it has.
func (c *Conn) memcachedHasSASL(ctx context.Context) (bool, []string, error) {
	c.cork()
	mechs := c.send(memdx.NewSASLListMechs())
	c.uncork()
	if err := c.await(ctx, mechs); err != nil {
		return false, nil, err
	}
	switch mechs.status {
	case memdx.StatusSuccess:
		return true, memdx.DecodeSASLMechanisms(mechs.value), nil
	case memdx.StatusAuthError:
		return true, nil, nil
	case memdx.StatusUnknownCommand, memdx.StatusNotSupported:
		return false, nil, nil
	}
	return false, nil, c.stepError(mechs, "server refused to list SASL mechanisms")
}
