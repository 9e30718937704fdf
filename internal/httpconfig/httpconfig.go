// Package httpconfig reads a bucket's cluster config from the cluster
// manager's REST API, as Couchbase's SDKs do where the KV service does not
// serve it (a memcached bucket, a KV port a firewall blocks, RFC 0011's
// host:port=http seeds, bootstrap_on=http):
//
//	GET /pools/default/b/<bucket>     the bucket's terse config (Fetch)
//	GET /pools/default/bs/<bucket>    the same, then every newer one, each
//	                                  followed by "\n\n\n\n" (Stream)
//
// with HTTP Basic auth, over HTTP or HTTPS with the KV connections' TLS
// settings. A config is delivered raw, with the host it came from (what
// "$HOST" in it stands for): judging and parsing it is the caller's, by
// the same rules as a config from any other source. A config over
// vbmap.MaxConfigSize is never read into memory: Fetch fails, Stream skips
// it. Stream keeps one stream open, on one node at a time, and reopens it
// on the next node when it ends or has been open for the redial period.
package httpconfig

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/dnsctx"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// Bounds of the wait between two rounds of stream attempts in which no
// node served a config, and before reopening a stream that delivered and
// ended within maxRoundWait of its opening: doubling from minRoundWait to
// maxRoundWait.
const (
	minRoundWait = 100 * time.Millisecond
	maxRoundWait = 10 * time.Second
)

// wantedWaitShare: a config wanted cuts a reopen wait of d to
// max(minRoundWait, d/wantedWaitShare) (Stream): a proxy that ends every
// stream at once while the nodes keep wanting a config costs one reopen
// per maxRoundWait/wantedWaitShare (2.5 s), not one per minRoundWait.
const wantedWaitShare = 4

// endLogInterval: a stream that ended at once is logged at most once per
// endLogInterval of the Clock, with how many ended since (Stream).
const endLogInterval = 10 * time.Second

// defaultRedialPeriod is Config.RedialPeriod's default: gocbcore's HTTP
// config poller also closes its stream after 10 s (HTTPRedialPeriod).
const defaultRedialPeriod = 10 * time.Second

// separator ends each config of a streamed endpoint.
var separator = []byte("\n\n\n\n")

// Config configures a Client.
type Config struct {
	// Bucket is the bucket whose config is read.
	Bucket string
	// Username and Password are sent with HTTP Basic auth (none when
	// Username is empty). Without TLS that is the password in clear on
	// the network, which the client's KV connections never send so
	// (SCRAM): the first request that carries it logs a warning, once
	// per Client.
	Username, Password string
	// TLS, when set, makes the requests HTTPS with (a clone of) this
	// config; ServerName defaults to each node's host. nil: HTTP.
	TLS *tls.Config
	// ConnectTimeout bounds connecting to a node and the wait for its
	// answer's headers (and for an error answer's body); a Fetch also
	// ends at its context's deadline.
	// Default 10 s.
	ConnectTimeout time.Duration
	// RedialPeriod bounds how long one stream is kept open, on the Clock,
	// from its answer's headers: it is then closed and reopened on the
	// next node, so that a node that stops sending without closing (a
	// frozen process, a half-dead proxy) holds the client's view of the
	// cluster no longer than this. A healthy stream is as silent while
	// no config changes (ns_server writes only when the config changed),
	// so only the stream's age can tell. Default 10 s.
	RedialPeriod time.Duration
	// MaxConfigSize bounds one config (default vbmap.MaxConfigSize).
	MaxConfigSize int
	// UserAgent is the User-Agent header (default "kvwire").
	UserAgent string
	// DialContext opens TCP connections (nil: a net.Dialer whose host name
	// lookups use Resolver, each dial's its own, ended with the dial:
	// internal/dnsctx).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolver looks host names up for the default DialContext (nil:
	// net.DefaultResolver).
	Resolver *net.Resolver
	// Clock times the waits between rounds of stream attempts and the
	// redial period (nil: the real clock). Sockets keep real time.
	Clock  retry.Clock
	Logger *slog.Logger
}

// Client reads configs from cluster manager nodes. Its methods are safe
// for concurrent use. It holds no connection between requests, and
// starts no goroutine that outlives the call that started it: each
// request dials its own connection on the calling goroutine, and Fetch,
// and Stream, return only once that connection is closed and nothing of
// the request runs any more (a client's Close promises that no goroutine
// of the client is left when it returns; net/http's Transport dials and
// reads on goroutines of its own, which end only after the request did).
type Client struct {
	cfg Config
	// cleartext is set by the request that logs, once, that the
	// client sends the password in clear (Basic auth without TLS).
	cleartext atomic.Bool
}

// New returns a Client.
func New(cfg Config) *Client {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.RedialPeriod <= 0 {
		cfg.RedialPeriod = defaultRedialPeriod
	}
	if cfg.MaxConfigSize <= 0 {
		cfg.MaxConfigSize = vbmap.MaxConfigSize
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kvwire"
	}
	if cfg.Clock == nil {
		cfg.Clock = retry.RealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialContext == nil {
		resolver := cfg.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			// A resolver of its own, whose queries end with ctx: the
			// Go resolver otherwise waits for a silent DNS server
			// until its own timeout, past Close (conn's dial does
			// the same).
			d := net.Dialer{Resolver: dnsctx.Interruptible(resolver)}
			return d.DialContext(ctx, network, addr)
		}
	}
	return &Client{cfg: cfg}
}

// dial connects to addr within ctx and, with TLS, runs the handshake with
// the KV connections' settings, so that a certificate refused here is the
// same *conn.TLSError (kverr.ErrTLS) a KV dial gives. raw is the TCP
// connection under nc (nc itself without TLS).
func (c *Client) dial(ctx context.Context, addr string) (nc, raw net.Conn, err error) {
	raw, err = c.cfg.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if raw == nil {
		return nil, nil, errors.New("DialContext returned no connection and no error")
	}
	if c.cfg.TLS == nil {
		return raw, raw, nil
	}
	cfg := c.cfg.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = hostOf(addr)
	}
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		if ctx.Err() == nil && conn.IsTLSFailure(err) {
			return nil, nil, &conn.TLSError{Addr: addr, Err: err}
		}
		return nil, nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, raw, nil
}

// Error is a request to a cluster manager node that did not give a config:
// the node's answer (Status, with the start of its body), or the failure
// to get one (Err).
type Error struct {
	Addr, Path string
	// Status is the HTTP status (0 when there was no answer).
	Status int
	// Body is the start of an error answer's body (ns_server's message),
	// with any of the request's credentials it quotes (the Basic auth
	// token, the password) masked.
	Body string
	// Location is the start of where a redirect (3xx) pointed, with the
	// request's credentials masked as in Body: it is
	// not followed (ns_server does not redirect its config endpoints;
	// whatever does, a proxy, would take the credentials elsewhere).
	Location string
	Err      error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster manager %s: GET %s: ", e.Addr, e.Path)
	switch {
	case e.Status == http.StatusUnauthorized:
		b.WriteString("401 Unauthorized: the credentials were refused")
	case e.Status == http.StatusForbidden:
		b.WriteString("403 Forbidden: the user may not read the bucket's config")
	case e.Status == http.StatusNotFound:
		b.WriteString("404 Not Found: no such bucket")
	case e.Location != "":
		fmt.Fprintf(&b, "HTTP %d, a redirect to %q (not followed)", e.Status, e.Location)
	case e.Status != 0:
		fmt.Fprintf(&b, "HTTP %d", e.Status)
	default:
		b.WriteString(e.Err.Error())
		return b.String()
	}
	if e.Body != "" {
		fmt.Fprintf(&b, " (%q)", e.Body)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the answers that end a bootstrap at once as the KV service's
// do: 401 kverr.ErrAuthenticationFailure, 403 and 404
// kverr.ErrBucketNotFound (SELECT_BUCKET's EACCESS and KEY_ENOENT).
func (e *Error) Is(target error) bool {
	switch e.Status {
	case http.StatusUnauthorized:
		return target == kverr.ErrAuthenticationFailure
	case http.StatusForbidden, http.StatusNotFound:
		return target == kverr.ErrBucketNotFound
	}
	return false
}

// bucketPath is the path of the bucket's terse config, streamed or not.
func (c *Client) bucketPath(stream bool) string {
	p := "/pools/default/b/"
	if stream {
		p = "/pools/default/bs/"
	}
	return p + url.PathEscape(c.cfg.Bucket)
}

// errNoAnswer ends a request whose node did not answer within the
// connect timeout.
var errNoAnswer = errors.New("no answer")

// get sends GET path to addr and returns the answer when it is 200 OK. The
// dial and the wait for the headers (and for an error answer's body) end
// after ConnectTimeout (real time) or when ctx ends; a 200's body is read
// under ctx alone. The request has its
// own connection, which ctx's end closes; the caller closes the body,
// which closes the connection and returns once nothing of the request
// runs any more.
func (c *Client) get(ctx context.Context, addr, path string) (*http.Response, error) {
	scheme := "http"
	if c.cfg.TLS != nil {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+path, nil)
	if err != nil {
		return nil, &Error{Addr: addr, Path: path, Err: err}
	}
	if c.cfg.Username != "" {
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	req.Close = true // one request per connection: "Connection: close"
	// noAnswer wraps err when the connect timeout, rather than ctx or the
	// node, ended the request.
	noAnswer := func(err error) error {
		if ctx.Err() == nil {
			err = fmt.Errorf("no answer within the connect timeout (%v): %w", c.cfg.ConnectTimeout, err)
		}
		return err
	}
	// Before the deadline starts: a Logger that takes its time eats
	// none of the request's. Logged under no lock (a sync.Once would
	// hold every other request of the client until it was written).
	if c.cfg.Username != "" && c.cfg.TLS == nil && c.cleartext.CompareAndSwap(false, true) {
		// ns_server also takes SCRAM over HTTP (RFC 7804:
		// ns_server's src/scram_sha.erl, menelaus_auth.erl),
		// which Couchbase's SDKs do not use either: gocbcore,
		// the C++ core and libcouchbase send Basic auth to 8091.
		c.cfg.Logger.Warn("kvwire: sending the password to the cluster manager in clear (HTTP Basic auth without TLS): "+
			"use couchbases:// to send it over TLS, or bootstrap_on=cccp where the KV service serves the bucket's configs",
			"node", addr, "user", c.cfg.Username)
	}
	deadline := time.Now().Add(c.cfg.ConnectTimeout)
	dctx, dcancel := context.WithDeadlineCause(ctx, deadline, errNoAnswer)
	nc, raw, err := c.dial(dctx, addr)
	timedOut := errors.Is(context.Cause(dctx), errNoAnswer)
	dcancel()
	if err != nil {
		if timedOut {
			err = noAnswer(err)
		}
		return nil, &Error{Addr: addr, Path: path, Err: err}
	}
	w := watch(ctx, raw)
	fail := func(err error) (*http.Response, error) {
		w.close()
		if ctx.Err() != nil {
			// The watcher closed the connection: the read's error
			// says only that.
			err = fmt.Errorf("no answer before the request's end: %w", context.Cause(ctx))
		}
		return nil, &Error{Addr: addr, Path: path, Err: err}
	}
	// The request and the wait for the headers end at the deadline.
	_ = nc.SetDeadline(deadline)
	if err := req.Write(nc); err != nil {
		return fail(noAnswerIfDeadline(err, noAnswer))
	}
	// The headers are bounded, as net/http's Transport bounds them
	// (MaxResponseHeaderBytes): http.ReadResponse would hold a line
	// without end in memory until the deadline.
	lr := &headerLimit{r: nc, left: maxHeaderBytes}
	br := bufio.NewReaderSize(lr, readBufSize)
	var resp *http.Response
	// Interim (1xx) answers come before the final one and are skipped,
	// as net/http's Transport skips them (RFC 9110 15.2: a client
	// parses them even when it asked for none).
	for interim := 0; ; interim++ {
		if resp, err = http.ReadResponse(br, req); err != nil {
			if lr.timedOut {
				// ReadResponse takes the part of a line read
				// before the deadline for the line: what it
				// finds wrong with it is the wait's end.
				return fail(noAnswer(err))
			}
			if lr.over {
				// Likewise the part read up to the bound: what is
				// wrong is the headers' length.
				return fail(errHeadersTooLong)
			}
			return fail(noAnswerIfDeadline(err, noAnswer))
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if interim == maxInterim {
			return fail(fmt.Errorf("more than %d interim (1xx) answers", maxInterim))
		}
	}
	lr.left = -1 // the body is bounded by its reader
	resp.Body = &connBody{ReadCloser: resp.Body, ctx: ctx, w: w}
	if resp.StatusCode != http.StatusOK {
		// The start of an error answer's body, read by the same
		// deadline: a node that sends the headers and then nothing
		// holds the request no longer than one that sends nothing.
		// Read past the part shown by the longest secret, so that
		// one that starts within it is read whole and masked.
		secrets := c.secrets()
		longest := 0
		for _, s := range secrets {
			longest = max(longest, len(s))
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(maxErrorBody+longest)))
		resp.Body.Close()
		var loc string
		if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
			// Masked as the body is: a proxy may echo the
			// credentials into it.
			loc = mask([]byte(resp.Header.Get("Location")), secrets)
		}
		return nil, &Error{Addr: addr, Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(mask(body, secrets)), Location: loc}
	}
	_ = nc.SetDeadline(time.Time{})
	return resp, nil
}

// maxErrorBody is how much of an error answer's body an Error shows.
const maxErrorBody = 200

// minSecretCut is the shortest start of a secret that mask cuts from the
// end of a body.
const minSecretCut = 4

// masked stands for a secret in an error answer's body.
const masked = "[masked]"

// secrets are what an answer may quote of the request's credentials (a
// proxy's error page that echoes the request): the Basic auth token and
// the password. None without a Username: none was sent.
func (c *Client) secrets() []string {
	if c.cfg.Username == "" {
		return nil
	}
	token := base64.StdEncoding.EncodeToString([]byte(c.cfg.Username + ":" + c.cfg.Password))
	if c.cfg.Password == "" {
		return []string{token}
	}
	return []string{token, c.cfg.Password}
}

// mask is body, read to at most maxErrorBody bytes and the longest of
// secrets, with every secret in it replaced by masked, then cut to
// maxErrorBody bytes (or to the end of a mask there), and cut again
// before the start of a secret it ends with, minSecretCut bytes or more
// of it (a body read in part, or cut
// by the sender, may end in the middle of one).
func mask(body []byte, secrets []string) string {
	s := string(body)
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, masked)
	}
	if len(s) > maxErrorBody {
		cut := maxErrorBody
		// Not in the middle of a mask.
		if i := strings.LastIndex(s[:min(len(s), cut+len(masked)-1)], masked); i >= 0 && i < cut && i+len(masked) > cut {
			cut = i + len(masked)
		}
		s = s[:cut]
	}
	for _, secret := range secrets {
		// Fewer than minSecretCut bytes are the end of ordinary text as
		// often as a secret's start ("Unauthorized" ends with the "d"
		// of the token of u:p), and say little of it.
		for k := min(len(secret)-1, len(s)); k >= minSecretCut; k-- {
			if strings.HasSuffix(s, secret[:k]) {
				s = s[:len(s)-k]
				break
			}
		}
	}
	return s
}

// maxHeaderBytes bounds an answer's status line and headers (ns_server's
// are a few hundred bytes).
const maxHeaderBytes = 1 << 20

// readBufSize is the size of an answer's read buffer, which bounds a
// chunk size line of its body (net/http's chunked reader reads the line
// within it).
const readBufSize = 4096

// maxInterim bounds the interim (1xx) answers skipped before the final
// one (net/http's Transport allows 5).
const maxInterim = 5

// errHeadersTooLong ends a request whose answer's headers run past
// maxHeaderBytes.
var errHeadersTooLong = fmt.Errorf("the answer's headers run past %d bytes: not a cluster manager's answer", maxHeaderBytes)

// headerLimit reads from r at most left bytes (no limit when left < 0),
// then fails with errHeadersTooLong (over). timedOut: a read of r failed
// at the connection's deadline.
type headerLimit struct {
	r        io.Reader
	left     int64
	timedOut bool
	over     bool
}

func (l *headerLimit) Read(b []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(b)
	}
	if l.left == 0 {
		l.over = true
		return 0, errHeadersTooLong
	}
	if int64(len(b)) > l.left {
		b = b[:l.left]
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		l.timedOut = true
	}
	return n, err
}

// noAnswerIfDeadline is noAnswer(err) when err is the connection's
// deadline passing, err otherwise.
func noAnswerIfDeadline(err error, noAnswer func(error) error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return noAnswer(err)
	}
	return err
}

// watcher closes a request's connection when its context ends, on a
// goroutine that close ends and waits for.
type watcher struct {
	raw     net.Conn
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// watch starts watching ctx for raw.
func watch(ctx context.Context, raw net.Conn) *watcher {
	w := &watcher{raw: raw, stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		select {
		case <-ctx.Done():
			raw.Close() // ends a read or write blocked on the node
		case <-w.stop:
		}
	}()
	return w
}

// close closes the connection (the socket under TLS: no close_notify to a
// node that may not read it) and returns once the watching goroutine has.
func (w *watcher) close() {
	w.once.Do(func() {
		close(w.stop)
		<-w.stopped
		w.raw.Close()
	})
}

// connBody is an answer's body on its own connection: closing it closes
// the connection. A read that fails once ctx ended (the watcher closed
// the connection under it) says so, with ctx's cause; one that fails on a
// chunk size line too long says that, where net/http says "header line
// too long".
type connBody struct {
	io.ReadCloser
	ctx context.Context
	w   *watcher
}

func (b *connBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, http.ErrLineTooLong) {
		err = fmt.Errorf("bad chunked coding: a chunk size line of %d bytes or more (net/http: %w)", readBufSize, err)
	}
	if err != nil && err != io.EOF && b.ctx.Err() != nil {
		err = fmt.Errorf("the request ended: %w: %w", context.Cause(b.ctx), err)
	}
	return n, err
}

func (b *connBody) Close() error {
	b.w.close()
	return nil
}

// Fetch reads the bucket's config from the node at addr ("host:port" of
// its REST port): raw is the config, host what "$HOST" in it stands for.
// It fails with an *Error (or one naming the size limit) when the node
// gives none.
func (c *Client) Fetch(ctx context.Context, addr string) (raw []byte, host string, err error) {
	path := c.bucketPath(false)
	resp, err := c.get(ctx, addr, path)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(io.LimitReader(resp.Body, int64(c.cfg.MaxConfigSize)+1))
	if err != nil {
		return nil, "", &Error{Addr: addr, Path: path, Status: resp.StatusCode, Err: fmt.Errorf("reading the config: %w", err)}
	}
	if len(raw) > c.cfg.MaxConfigSize {
		return nil, "", &Error{Addr: addr, Path: path, Status: resp.StatusCode,
			Err: fmt.Errorf("the config is over the size limit (%d bytes)", c.cfg.MaxConfigSize)}
	}
	return bytes.TrimSpace(raw), hostOf(addr), nil
}

// Sink receives the configs a stream delivers: raw (valid only during the
// call: copy what you keep), host (what "$HOST" in it stands for) and the
// address of the node it came from. An error refuses the node's stream
// (a node serving another cluster's configs): it is ended, and the node
// counts as one that served none.
type Sink func(raw []byte, host, addr string) error

// Stream keeps the bucket's config stream open and delivers every config
// it carries to sink, until ctx ends. nodes gives the REST addresses to
// stream from (the config in use's nodes; it is asked again each time a
// stream ends). A stream open for Config.RedialPeriod (10 s) is closed and
// reopened on the next node at once, as gocbcore does: a node that sends
// nothing more yet keeps the connection (a frozen process, a half-dead
// proxy) then holds the stream no longer than that; one that never sent
// a config counts as a node that served none. A stream that ends after it
// delivered is reopened on the next node: at once when it had lived 10 s
// or more, and otherwise after a wait of 100 ms, doubling to 10 s while
// streams keep ending that soon (a proxy that ends every response must
// not make it reopen in a loop); but at once, not counting toward that
// wait, when its node is no longer among nodes (it left the cluster, and
// its stream ended with it); and after 100 ms, the doubling begun anew,
// when it delivered a config newer than any the streams delivered before
// (the cluster is changing: a node removed may close its stream before it
// sends the config without itself, and a fault that ends every stream
// brings the same config again). A stream whose config the sink refused
// is ended and its node passed over for the next at once, as one that
// served none.
// When every node of a round failed to serve one, unreachable (nil: none)
// is called, and the next round waits 100 ms, doubling to 10 s, and a
// stream that delivers resets that wait.
// A value received on wake (nil: none) while Stream waits to reopen a
// stream that delivered (a node said the config is out of date without
// sending a newer one) ends the wait a quarter of its length (at least
// 100 ms) after it began, or at once when it began longer ago: the config
// is wanted now, and a fault that ends every stream at once while the
// nodes keep wanting one (each NOT_MY_VBUCKET a value) costs no more than
// a reopen per 2.5 s once the back-off reached 10 s; a stream that ended
// at once is logged at most once per 10 s (endLogInterval). A value
// received before a stream opened is dropped as it opens (streamFrom):
// the config it sends first answers it, and it is no reason to cut short
// the wait after that stream. A value does not cut short the wait after
// a round in which no node served a stream: that the config is wanted
// makes the nodes no likelier to serve it, and the stream that fails is
// why a node keeps saying so (its NOT_MY_VBUCKETs
// without the config, kv_engine's DedupeNotMyVbucketClustermap), which
// would have every node asked, and a failure logged for each, ten times
// a second. Waits and a stream's life are on the Clock. It returns when
// ctx ends, having closed its connection.
func (c *Client) Stream(ctx context.Context, nodes func() []string, wake <-chan struct{}, unreachable func(), sink Sink) {
	wait := minRoundWait
	var reopen time.Duration // before reopening after a stream that delivered
	last := ""               // the node whose stream ended last
	var endLogged time.Time  // when a stream that ended at once was last logged
	var endsUnlogged int     // streams that ended at once since, not logged
	// newest: the newest version the streams delivered (newestSet: one
	// did); brought: the stream being read delivered a newer one.
	var newest vbmap.Version
	var newestSet, brought bool
	deliver := func(raw []byte, host, addr string) error {
		if err := sink(raw, host, addr); err != nil {
			return err
		}
		if v, ok := vbmap.PeekVersion(raw); ok && (!newestSet || v.Newer(newest)) {
			newest, newestSet, brought = v, true, true
		}
		return nil
	}
	sleep := func(d time.Duration, wake <-chan struct{}) bool {
		start := c.cfg.Clock.Now()
		cut := max(minRoundWait, d/wantedWaitShare)
		t := c.cfg.Clock.NewTimer(d)
		defer func() { t.Stop() }()
		for w := wake; ; {
			select {
			case <-t.C():
				return true
			case <-w:
				w = nil
				left := cut - c.cfg.Clock.Now().Sub(start)
				if left <= 0 {
					c.cfg.Logger.Debug("kvwire: a config is wanted; reopening the config stream now")
					return true
				}
				if left < d-c.cfg.Clock.Now().Sub(start) {
					c.cfg.Logger.Debug("kvwire: a config is wanted; reopening the config stream sooner", "in", left)
					t.Stop()
					t = c.cfg.Clock.NewTimer(left)
				}
			case <-ctx.Done():
				return false
			}
		}
	}
	for ctx.Err() == nil {
		addrs := nodes()
		if len(addrs) == 0 {
			c.cfg.Logger.Warn("kvwire: no cluster manager address to stream configs from")
		}
		// Start after the node whose stream ended last.
		start := 0
		if i := slices.Index(addrs, last); i >= 0 {
			start = i + 1
		}
		delivered, left := false, false
		for j := range addrs {
			addr := addrs[(start+j)%len(addrs)]
			opened := c.cfg.Clock.Now()
			brought = false
			n, err := c.streamFrom(ctx, addr, wake, deliver)
			if ctx.Err() != nil {
				return
			}
			last = addr
			if n > 0 && !errors.Is(err, errRefused) {
				redialed := errors.Is(err, errRedial)
				// A node no longer among those to stream from has
				// left the cluster: its stream ended for that (the
				// node removed, closing its streams), not for a
				// proxy's habit of ending every response, and the
				// next node is asked at once, whatever the back-off
				// (a swap of nodes every few seconds would otherwise
				// double it at each swap, and the client would learn
				// of each move later).
				left = !redialed && !slices.Contains(nodes(), addr)
				switch {
				case left:
				case redialed || c.cfg.Clock.Now().Sub(opened) >= maxRoundWait:
					reopen = 0 // it lived: it did not end at once
				case brought:
					// The cluster is changing (a rebalance whose
					// removed node closed its stream before it sent
					// the config without itself, say), not a fault
					// ending every stream, which brings the same
					// config again: the back-off starts anew.
					reopen = minRoundWait
				default:
					reopen = min(max(2*reopen, minRoundWait), maxRoundWait)
				}
				switch {
				case redialed:
					c.cfg.Logger.Debug("kvwire: config stream open for the redial period; reopening it on the next node", "node", addr, "configs", n)
				case left:
					c.cfg.Logger.Info("kvwire: config stream ended, its node left the cluster; reopening it on the next node", "node", addr, "configs", n, "err", err)
				case !endLogged.IsZero() && c.cfg.Clock.Now().Sub(endLogged) < endLogInterval:
					endsUnlogged++
				default:
					c.cfg.Logger.Info("kvwire: config stream ended; reopening it on the next node", "node", addr, "configs", n, "err", err, "retry_in", reopen, "ended_unlogged", endsUnlogged)
					endLogged, endsUnlogged = c.cfg.Clock.Now(), 0
				}
				delivered = true
				break
			}
			c.cfg.Logger.Warn("kvwire: no config stream from a node", "node", addr, "err", err)
		}
		if delivered {
			wait = minRoundWait
			if reopen > 0 && !left && !sleep(reopen, wake) {
				return
			}
			continue
		}
		if unreachable != nil {
			unreachable()
		}
		if !sleep(wait, nil) { // not cut short by wake: see above
			return
		}
		wait = min(2*wait, maxRoundWait)
	}
}

// errRedial ends a stream open for the redial period.
var errRedial = errors.New("the stream was open for the redial period")

// errRefused ends a stream whose config the sink refused.
var errRefused = errors.New("the stream's config was refused")

// streamFrom opens the stream on addr and delivers its configs until it
// ends, or until it has been open (since its headers) for the redial
// period, on the Clock: then err matches errRedial; or until sink refuses
// a config: then err matches errRefused. n is how many configs it
// delivered (not counting one refused), err why it ended. A value on wake
// (a config wanted) received before the stream opened is dropped once it
// has: the config the node sends first, the one it holds, answers it.
func (c *Client) streamFrom(ctx context.Context, addr string, wake <-chan struct{}, sink Sink) (n int, err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.get(sctx, addr, c.bucketPath(true))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	r := newConfigReader(resp.Body, c.cfg.MaxConfigSize)
	select {
	case <-wake:
	default:
	}
	period := c.cfg.RedialPeriod
	t := c.cfg.Clock.NewTimer(period)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-t.C():
			cancel(errRedial) // ends the body's reads
		case <-sctx.Done():
		}
	}()
	defer func() {
		t.Stop()
		cancel(nil)
		<-watched
	}()
	defer func() {
		// A config refused ends the stream for the refusal, even when the
		// redial period ran out as the sink judged it.
		if errors.Is(context.Cause(sctx), errRedial) && ctx.Err() == nil && !errors.Is(err, errRefused) {
			if n == 0 {
				err = fmt.Errorf("%w (%v) without sending a config", errRedial, period)
			} else {
				err = fmt.Errorf("%w (%v)", errRedial, period)
			}
		}
		// A config over the limit that the end cut short was never
		// logged as skipped: the end says so.
		if over := r.over(); over > 0 && err != nil && !errors.Is(err, errRefused) {
			err = fmt.Errorf("%w, cut short %d bytes into a config over the size limit (%d bytes)", err, over, c.cfg.MaxConfigSize)
		}
	}()
	c.cfg.Logger.Debug("kvwire: streaming cluster configs", "node", addr)
	host := hostOf(addr)
	for {
		raw, skipped, err := r.next()
		if skipped > 0 {
			c.cfg.Logger.Error("kvwire: ignoring a streamed cluster config over the size limit",
				"node", addr, "bytes", skipped, "limit", c.cfg.MaxConfigSize)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the node closed the stream")
			}
			return n, err
		}
		if raw != nil {
			if err := sink(raw, host, addr); err != nil {
				return n, fmt.Errorf("%w: %w", errRefused, err)
			}
			n++
		}
	}
}

// configReader splits a stream into the configs between separators,
// holding at most max bytes of one: a longer one is skipped up to its
// separator.
type configReader struct {
	r   io.Reader
	max int
	buf []byte // read, not yet returned: buf[off:]
	off int
	// skipping: the config being read is over max; skipped counts its
	// bytes dropped so far.
	skipping bool
	skipped  int
	// err is the error r returned, with the last bytes or alone: it
	// ends the stream once the configs read before it are returned (r
	// need not return it again: net/http's body returns a trailer's
	// error once, and "invalid Read on closed Body" after it).
	err error
}

func newConfigReader(r io.Reader, max int) *configReader {
	return &configReader{r: r, max: max}
}

// next returns the next config (nil for an empty one, such as a
// separator alone), or, with skipped > 0, the size of a config it dropped
// for its size. The config is valid until the next call. err ends the
// stream (io.EOF when it ended cleanly; a config cut short by the end is
// dropped).
func (cr *configReader) next() (cfg []byte, skipped int, err error) {
	scanFrom := cr.off
	for {
		if i := bytes.Index(cr.buf[scanFrom:], separator); i >= 0 {
			end := scanFrom + i
			tok := cr.buf[cr.off:end]
			cr.off = end + len(separator)
			if cr.skipping || len(tok) > cr.max {
				skipped = cr.skipped + len(tok)
				cr.skipping, cr.skipped = false, 0
				return nil, skipped, nil
			}
			if tok = bytes.TrimSpace(tok); len(tok) == 0 {
				return nil, 0, nil
			}
			return tok, 0, nil
		}
		if cr.err != nil {
			return nil, 0, cr.err
		}
		// The separator may start in the last len(separator)-1 bytes.
		scanFrom = max(cr.off, len(cr.buf)-(len(separator)-1))
		if pending := len(cr.buf) - cr.off; pending > cr.max+len(separator) {
			// Over the limit: drop what cannot hold a separator's start.
			drop := pending - (len(separator) - 1)
			cr.skipping = true
			cr.skipped += drop
			cr.off += drop
			scanFrom = cr.off
		}
		if cr.off == len(cr.buf) {
			cr.buf, cr.off, scanFrom = cr.buf[:0], 0, 0
		}
		if len(cr.buf) == cap(cr.buf) && cr.off > 0 {
			// Move the unread bytes to the front rather than grow.
			n := copy(cr.buf, cr.buf[cr.off:])
			scanFrom -= cr.off
			cr.buf, cr.off = cr.buf[:n], 0
		}
		if len(cr.buf) == cap(cr.buf) {
			// At most a config, a separator and a read's worth: the
			// unread bytes never exceed max+len(separator) here.
			cr.buf = slices.Grow(cr.buf, min(max(4096, len(cr.buf)), cr.max+len(separator)+4096-len(cr.buf)))
		}
		k, rerr := cr.r.Read(cr.buf[len(cr.buf):cap(cr.buf)])
		cr.buf = cr.buf[:len(cr.buf)+k]
		cr.err = rerr
	}
}

// over is how many bytes of a config over the limit were read, not yet
// followed by its separator (0: none).
func (cr *configReader) over() int {
	if n := cr.skipped + len(cr.buf) - cr.off; cr.skipping || n > cr.max {
		return n
	}
	return 0
}

// hostOf is addr's host, without brackets.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
