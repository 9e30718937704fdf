package conn

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/kvwire/kvwire/errmap"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// DefaultMaxPending is the default bound on requests in flight on one
// connection (Options.MaxPending).
const DefaultMaxPending = 4096

// Health-check defaults (Options.ProbeAfter, ProbeTimeout, MaxAbandoned).
const (
	DefaultProbeAfter   = time.Second
	DefaultProbeTimeout = time.Second
	DefaultMaxAbandoned = 4096
)

// DefaultConnectAttempt is how long a connection attempt goes unanswered
// before another begins beside it (Options.ConnectAttempt).
const DefaultConnectAttempt = 500 * time.Millisecond

// DefaultClientName is the agent HELLO sends when Options.ClientName is
// empty.
const DefaultClientName = "kvwire"

// maxClientID bounds Options.ClientID: with "/" and a connection's own 16
// hex digits it fills memdx.MaxHelloConnectionIDLen.
const maxClientID = memdx.MaxHelloConnectionIDLen - 17

// maxClientName bounds the agent sent in HELLO so that the padded HELLO key
// stays within the 250 bytes a key may have (see helloKey).
const maxClientName = 160

// DefaultMechanisms is the SASL preference order when
// Options.SASLMechanisms is nil: the strongest SCRAM first, PLAIN last (and
// PLAIN only over TLS or with Options.AllowPlainAuthWithoutTLS).
var DefaultMechanisms = []string{memdx.MechScramSHA512, memdx.MechScramSHA256, memdx.MechScramSHA1, memdx.MechPlain}

// Options configure Dial. The zero value dials a Couchbase node over plain
// TCP without credentials.
type Options struct {
	// Username and Password are the SASL credentials; no authentication is
	// done when Username is empty.
	Username, Password string

	// SASLMechanisms are the mechanisms the client accepts, strongest
	// first; nil means DefaultMechanisms. The first one the server also
	// lists is used. PLAIN is dropped unless TLSConfig is set or
	// AllowPlainAuthWithoutTLS is true. Plain memcached offers only PLAIN:
	// in memcached mode (asked for, or after a refused HELLO) with a
	// Username, a server with SASL makes Dial fail with an *AuthError,
	// without sending the password, unless PLAIN is allowed here; a server
	// without SASL is used unauthenticated (see the package doc).
	SASLMechanisms []string

	// AllowPlainAuthWithoutTLS permits SASL PLAIN, which sends the password
	// in clear, over a connection without TLS. It is needed for plain
	// memcached with SASL (which offers nothing but PLAIN) over TCP.
	AllowPlainAuthWithoutTLS bool

	// Bucket is selected with SELECT_BUCKET when non-empty (Couchbase
	// mode only; Dial rejects it in memcached mode).
	Bucket string

	// NoClusterConfig leaves GET_CLUSTER_CONFIG out of the Couchbase
	// bootstrap, for a client that reads its configs elsewhere (the
	// cluster manager over HTTP).
	NoClusterConfig bool

	// Memcached selects plain memcached mode: no HELLO, error map, bucket
	// or cluster config; SASL PLAIN first when a Username is given and the
	// server has SASL (PLAIN must be allowed: see SASLMechanisms). A
	// Couchbase-mode Dial that finds plain memcached switches to this mode
	// by itself (see the package doc).
	Memcached bool

	// TLSConfig enables TLS when non-nil. Verification follows the config:
	// it is on unless InsecureSkipVerify is set; RootCAs, when set, replaces
	// the system roots (crypto/tls), so a pool of custom roots trusts those only.
	// When ServerName is empty, the host of the address is used. Dial
	// clones the config and does not modify it; the clone has
	// DynamicRecordSizingDisabled set (one Write, one record: see
	// recordChunk).
	TLSConfig *tls.Config

	// ClientName is the agent HELLO reports to the server (it shows in the
	// server's logs); DefaultClientName when empty. It is cut to at most
	// 160 bytes, at a character boundary.
	ClientName string

	// Features are the HELLO features requested. XERROR is always added
	// (unless a corrupt error map forced it off, see the package doc).
	// Server-initiated cluster-map notifications need FeatureDuplex and
	// FeatureClustermapChangeNotification (or its Brief variant).
	Features []memdx.HelloFeature

	// MaxPending bounds the requests in flight (queued, being written, or
	// written and waiting for their answer); past it Do fails at once with
	// kverr.ErrOverloaded. Abandoned requests (see MaxAbandoned) do not count.
	// 0 means DefaultMaxPending. Dial's own bootstrap requests do not count
	// against it: any value works.
	MaxPending int

	// MaxAbandoned bounds the tombstones: requests whose caller gave up
	// (ctx or deadline) after they were sent, kept until their late answer
	// arrives so that it is recognized and dropped. Past it the oldest is
	// forgotten (its answer, should it come, is dropped as a stray);
	// reaching half of it makes the connection probe the node (see
	// ProbeAfter). 0 means DefaultMaxAbandoned (4096).
	MaxAbandoned int

	// ProbeAfter: a request abandoned after it was sent and still
	// unanswered ProbeAfter later makes the connection probe the node with
	// a NOOP (see the package doc, Health; a synchronous write is due
	// ProbeAfter after its durability timeout, and while one is in flight
	// the probe waits for that timeout or its answer). 0 means DefaultProbeAfter
	// (1 s); a negative value turns the health check off.
	ProbeAfter time.Duration

	// ProbeTimeout: a probe unanswered while the connection makes no
	// progress (nothing read; nothing written while the probe is not yet
	// written; on Linux, none of the bytes the socket held before the
	// probe acknowledged by the node) for ProbeTimeout closes the
	// connection with kverr.ErrUnresponsive. 0 means DefaultProbeTimeout
	// (1 s).
	ProbeTimeout time.Duration

	// MaxBodyLength bounds the body of a packet the server may send; a
	// larger one closes the connection with a protocol error. 0 means
	// memdx.DefaultMaxBodyLength.
	MaxBodyLength uint32

	// OnClustermapNotification receives server-initiated cluster-map change
	// notifications. It runs on the goroutine reading the connection (its
	// reader goroutine, or a caller in Do that borrowed the read role: see
	// the package doc): it must not block (no other response is read
	// meanwhile) and must not call Close or Do. The notification's slices
	// alias the read buffer and are valid only during the call: copy what
	// you keep.
	//
	// Callbacks fire only for the connection Dial returns, never for one it
	// discards (a failed bootstrap, or the first connection of a redial).
	// Server requests that arrive while Dial is bootstrapping are kept
	// (up to 16, 4 MiB) and delivered in order on Dial's goroutine just
	// before it returns; the reader holds back newer ones meanwhile, so
	// callbacks, OnClose included, never run concurrently.
	OnClustermapNotification func(memdx.ClustermapNotification)

	// OnServerRequest receives every other server-initiated request (magic
	// 0x82), under the same rules as OnClustermapNotification. Without it
	// they are dropped (and logged at debug level). The connection never
	// answers them.
	OnServerRequest func(*memdx.Packet)

	// OnClose, if set, is called once when a connection Dial returned has
	// ended, with the error Err returns, after every pending request has
	// been failed; not for connections Dial discards. It runs on the reader
	// goroutine just before it exits: it must not block and must not call
	// Close.
	OnClose func(error)

	// OnOrphan, if set, is told of each late answer: the final response
	// to a request whose caller left after it was sent (a tombstone; for
	// a group of gets, its NOOP's answer), with what the request's Origin
	// said. It runs on the goroutine reading the connection (see
	// OnClustermapNotification), after the connection's lock is released:
	// it must be quick, must not block and must not call the connection. It is meant for a counter or a sample (the client's
	// orphan report), not for a caller's code.
	OnOrphan func(Orphan)

	// ClientID, when set, prefixes the connection's id: ID (sent in
	// HELLO, shown in the server's logs) is then "ClientID/<the
	// connection's own id>", the local id RFC 0067 reports
	// (couchbase.local_id). It is cut to at most 16 bytes, at a character
	// boundary, so that the whole id fits the 33 bytes HELLO carries.
	ClientID string

	// DialContext opens the network connection; nil uses a net.Dialer.
	// TLS, when configured, is layered on what it returns.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Resolver looks the address's host name up when DialContext is nil;
	// nil uses net.DefaultResolver. The connection attempts of one dial
	// share its lookup (a later attempt waits for the one in flight, so
	// that a lookup slower than ConnectAttempt's rotation is not given
	// up), which ends when the attempts waiting for it do, and at the
	// latest when the dial returns (the dial's context, Close), also when
	// the DNS server does not answer: the lookups of the Go resolver (and
	// so of a Resolver whose PreferGo is set) are made through it with
	// their queries' connections closed then. A lookup by the system's resolver (cgo) is
	// not interruptible: the dial returns, but the lookup goes on.
	Resolver *net.Resolver

	// ConnectAttempt is how long one connection attempt (a DialContext
	// call) may go unanswered before another begins beside it. A SYN
	// lost to a network fault is sent again by the kernel only 1, 3, 7 s
	// after the first, so a dial that waits on it finds a healed network
	// seconds late; a fresh attempt sends a fresh SYN. At most
	// maxConnectAttempts (4) are in flight, the oldest given up to start
	// the next, so a server whose answer takes up to four times this long
	// is still reached. The first attempt to connect wins; one that fails
	// (refused, unreachable) ends the dial with its error. 0 means
	// DefaultConnectAttempt (500 ms); negative: a single attempt, as long
	// as the context allows.
	ConnectAttempt time.Duration

	// Logger receives bootstrap steps (debug) and failures (warn); nil
	// logs nothing.
	Logger *slog.Logger

	// Clock, when set, is where the connection reads the time of its
	// health check and gets its timers: when a tombstone is due for a
	// probe (ProbeAfter), how long a probe may go unanswered
	// (ProbeTimeout), the bounds of synchronous writes and range-scan
	// continues (and so BarrierWait), and the times of tombstones and late
	// answers (Orphan.Abandoned, Arrived) and LastActivity's own readings.
	// A test moves a fake one to drive the health check. Everything else
	// keeps the system clock: a request's deadline (DoDeadline) is
	// compared with the system clock, and so are the dial's timers
	// (ConnectAttempt) and the bootstrap's watch for silence
	// (ProbeTimeout while Dial bootstraps), so that a Clock that never
	// moves holds up neither a request's expiry nor a dial. nil: the
	// system clock. It is the retry package's Clock, the one the client
	// and its retries use (a *retry.FakeClock in tests).
	Clock retry.Clock

	// errorMapVersion overrides the version GET_ERROR_MAP asks for (tests).
	errorMapVersion uint16
	// clock is where the connection reads the time (tests); nil: the
	// system clock. It is health's too unless Clock is set.
	clock clock
	// health is the health check's clock (resolved: Clock, else clock).
	health clock
	// submitAt overrides how many requests in flight make the connection
	// crowded (tests; 0: submitAt, see submit.go).
	submitAt int
	// unsentOf returns the reader of the socket's unacknowledged byte
	// count the health check uses (nil: none); tests replace it. nil:
	// socketUnsent (SIOCOUTQ on Linux).
	unsentOf func(net.Conn) func() (int, bool)
}

// resolved returns a copy of o with defaults filled in. Slices are cloned:
// the caller may change its Options after Dial.
func (o Options) resolved() Options {
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxAbandoned <= 0 {
		o.MaxAbandoned = DefaultMaxAbandoned
	}
	if o.ProbeAfter == 0 {
		o.ProbeAfter = DefaultProbeAfter
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.ConnectAttempt == 0 {
		o.ConnectAttempt = DefaultConnectAttempt
	}
	if o.clock == nil {
		o.clock = systemClock{}
	}
	o.health = o.clock
	if o.Clock != nil {
		o.health = callerClock{o.Clock}
	}
	if o.unsentOf == nil {
		o.unsentOf = socketUnsent
	}
	if o.submitAt <= 0 {
		o.submitAt = submitAt
	}
	if o.MaxBodyLength == 0 {
		o.MaxBodyLength = memdx.DefaultMaxBodyLength
	}
	if o.ClientName == "" {
		o.ClientName = DefaultClientName
	}
	o.ClientID = memdx.TruncateUTF8(o.ClientID, maxClientID)
	o.ClientName = memdx.TruncateUTF8(o.ClientName, maxClientName)
	if o.SASLMechanisms == nil {
		o.SASLMechanisms = DefaultMechanisms
	}
	o.SASLMechanisms = slices.Clone(o.SASLMechanisms)
	o.Features = slices.Clone(o.Features)
	if o.errorMapVersion == 0 {
		o.errorMapVersion = errmap.MaxVersion
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// plainAllowed reports whether SASL PLAIN may be used.
func (o *Options) plainAllowed() bool { return o.TLSConfig != nil || o.AllowPlainAuthWithoutTLS }

// Features is the set of HELLO features a server granted. The zero value is
// the empty set. It is immutable.
type Features struct {
	bits [4]uint64 // features below 256, for a Has that does not scan
	list []memdx.HelloFeature
}

func newFeatures(list []memdx.HelloFeature) Features {
	f := Features{list: list}
	for _, x := range list {
		if x < 256 {
			f.bits[x>>6] |= 1 << (x & 63)
		}
	}
	return f
}

// Has reports whether x was granted.
func (f Features) Has(x memdx.HelloFeature) bool {
	if x < 256 {
		return f.bits[x>>6]&(1<<(x&63)) != 0
	}
	return slices.Contains(f.list, x)
}

// List returns the granted features in the order the server listed them;
// the slice is the caller's.
func (f Features) List() []memdx.HelloFeature { return slices.Clone(f.list) }

// Len is the number of granted features.
func (f Features) Len() int { return len(f.list) }

func (f Features) String() string {
	s := "["
	for i, x := range f.list {
		if i > 0 {
			s += " "
		}
		s += x.String()
	}
	return s + "]"
}
