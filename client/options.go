package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/kvwire/kvwire/internal/settings"
)

// Defaults. Each is also documented on the Options field it fills.
const (
	DefaultKVTimeout          = 2500 * time.Millisecond
	DefaultConnectTimeout     = 10 * time.Second
	DefaultConfigPollInterval = 2500 * time.Millisecond
	DefaultCompressionMinSize = 32
	// DefaultCompressionMinRatio: a compressed value is sent only when it is
	// at most 83% of the original, as Couchbase SDKs do.
	DefaultCompressionMinRatio = 0.83
	// DefaultServerFailureLimit is MemcachedOptions.ServerFailureLimit's
	// default, libmemcached's server_failure_limit.
	DefaultServerFailureLimit = 5
	// DefaultProbeAfter and DefaultProbeTimeout are HealthCheckOptions'
	// defaults.
	DefaultProbeAfter   = time.Second
	DefaultProbeTimeout = time.Second
)

// Defaults of the reports (RFC 0067), documented on the options that set
// them: ThresholdLoggingOptions, OrphanReportingOptions,
// LoggingMeterOptions.
const (
	DefaultThresholdInterval    = 10 * time.Second
	DefaultKVThreshold          = 500 * time.Millisecond
	DefaultThresholdSampleSize  = 10
	DefaultOrphanInterval       = 10 * time.Second
	DefaultOrphanSampleSize     = 10
	DefaultLoggingMeterInterval = 600 * time.Second
)

// Network names for Options.Network.
const (
	NetworkAuto     = "auto"
	NetworkDefault  = "default"
	NetworkExternal = "external"
)

// BootstrapOn says where a client reads its cluster configs from
// (connection string bootstrap_on, libcouchbase's name): the KV service
// (CCCP: GET_CLUSTER_CONFIG, notifications and NOT_MY_VBUCKET bodies) or
// the cluster manager's REST API over HTTP. The REST requests carry the
// credentials in HTTP Basic auth: in clear on couchbase:// (see
// Options.BootstrapOn).
type BootstrapOn string

const (
	// BootstrapOnBoth (the default): the KV service first; where no KV
	// seed serves a config (a memcached bucket answers GET_CLUSTER_CONFIG
	// with KEY_ENOENT, an older server does not know it, only =http seeds
	// were given), the cluster manager over HTTP, whose config stream then
	// keeps the client's config current.
	BootstrapOnBoth BootstrapOn = "both"
	// BootstrapOnCCCP: the KV service only.
	BootstrapOnCCCP BootstrapOn = "cccp"
	// BootstrapOnHTTP: the cluster manager only: the first config from
	// /pools/default/b/<bucket>, every newer one from its stream
	// (/pools/default/bs/<bucket>, and NOT_MY_VBUCKET bodies). The KV
	// service is not polled for configs; each new KV connection asks for
	// its node's config once, in its bootstrap, only to check that the
	// node is of the cluster the configs describe (clusterUUID, Server
	// 7.6.4 and later): one that answers for another cluster (its address
	// given to another cluster's node) is not used.
	BootstrapOnHTTP BootstrapOn = "http"
)

// Resolver looks up DNS SRV records (Options.Resolver). *net.Resolver
// satisfies it; LookupSRV is called with service and proto empty and the
// record's whole name ("_couchbase._tcp.cluster.example.com").
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
}

// Options configure Connect. The zero value is usable: every field has a
// default, and a zero field means its default. Connection-string options
// (?kv_timeout=...) override the fields they name. A value out of its range
// (negative durations, ConnectionsPerNode over 256, ...) makes Connect fail
// with ErrInvalidArgument (a *ConnStrError when it came from the connection
// string) rather than being replaced by the default.
type Options struct {
	// Username and Password are the RBAC credentials. Password is never
	// logged. On memcached:// they are used only where the server has SASL
	// (see AllowPlainAuthWithoutTLS).
	Username, Password string
	// Bucket is the bucket to open. couchbase:// and couchbases:// need
	// one, here or in the connection string's path (or ?bucket=); Connect
	// fails with ErrInvalidArgument when there is none, and when both are
	// given and differ. memcached:// has no buckets: setting it there is
	// also ErrInvalidArgument.
	Bucket string
	// Profile fills the fields it names (see ConfigProfile) where they are
	// left unset here and in the connection string; ProfileWANDevelopment
	// gives a client far from its cluster longer timeouts. Connection
	// string: profile=wan_development.
	Profile ConfigProfile
	// KVTimeout bounds every operation that has no earlier context
	// deadline. Default 2.5 s (DefaultKVTimeout; 20 s with
	// ProfileWANDevelopment).
	KVTimeout time.Duration
	// ConnectTimeout bounds bootstrapping one connection, and Connect's
	// search for a seed that bootstraps: a seed that accepted the
	// connection but did not answer in time is dialed again until it has
	// passed. Default 10 s (20 s with ProfileWANDevelopment). Connect
	// waits for the first dial of every node of the config, but once a
	// node is connected, not for one still dialing HealthCheck.ProbeTimeout
	// after it began (its dial goes on meanwhile).
	ConnectTimeout time.Duration
	// ConnectionsPerNode is the size of each node's connection pool,
	// 1..256. Default 1: one pipelined connection carries a lot.
	ConnectionsPerNode int
	// RetryStrategy decides retries for operations that do not set their
	// own. Default DefaultRetryStrategy(): fail fast on terminal errors
	// (wrong password, missing bucket or collection), best effort for the
	// rest (RFC 0049 revision 16).
	RetryStrategy RetryStrategy
	// NMVRetryInterval, when set, waits this fixed interval between
	// NOT_MY_VBUCKET retries as RFC 0005 does (100 ms there); zero uses RFC
	// 0049's controlled backoff (1, 10, 50, 100, 500, 1000 ms).
	NMVRetryInterval time.Duration
	// Logger receives connection, config and retry events; nil discards.
	// Its handler also runs on the client's own goroutines (each node's
	// connection upkeep, the config loop, the reports), which Close waits
	// for: a handler may call Close, which then starts the shutdown and
	// returns without waiting for them (see Client.Close). It also runs on
	// a connection's reader (a late answer to a request that timed out, a
	// malformed notification): an operation the handler runs on the same
	// client may wait there until its own deadline, and a mutation then
	// ends ambiguous. A handler that writes to the client it logs for
	// should hand the records to a goroutine of its own.
	Logger *slog.Logger
	// TLSConfig configures TLS for couchbases:// and memcacheds://, the
	// schemes that use TLS; nil there means the system roots with
	// verification on. Verification is on unless the config says
	// InsecureSkipVerify; RootCAs replaces the roots. couchbases:// with
	// no RootCAs trusts Couchbase Capella's root CA besides the system
	// roots, as Couchbase's SDKs do (CapellaRootCAPEM); a config with
	// RootCAs of its own trusts those only. The scheme alone
	// decides whether TLS is used: a TLSConfig with couchbase:// or
	// memcached:// is refused by Connect (ErrInvalidArgument) rather than
	// ignored or used to handshake with a plaintext port; use couchbases://
	// or memcacheds:// for TLS.
	TLSConfig *tls.Config
	// AllowPlainAuthWithoutTLS permits SASL PLAIN, which sends the password
	// in clear, over a connection without TLS (connection string:
	// allow_plain_auth=true). Off by default. Plain memcached with SASL
	// offers nothing but PLAIN: memcached:// with a Username to a server
	// with SASL fails to connect (ErrAuthenticationFailure matching
	// ErrPlainAuthRefused, the password unsent) unless this is set;
	// memcacheds:// needs no opt-in. A server without SASL is used
	// unauthenticated either way. Couchbase uses SCRAM.
	AllowPlainAuthWithoutTLS bool
	// BootstrapOn says where the cluster configs come from: the KV
	// service, the cluster manager's REST API over HTTP, or the KV service
	// first and HTTP where it serves none (the default, BootstrapOnBoth).
	// HTTP requests go to the connection string's =http hosts and, for a
	// host at the scheme's default KV port (or given without one), to the
	// same host's default REST port (8091, 18091 with couchbases://), with
	// HTTP Basic auth and, on couchbases://, over HTTPS with TLSConfig.
	// On couchbase:// that is the password in clear on the network (the
	// KV connections use SCRAM): the first such request logs a warning,
	// once per client. couchbases://, or BootstrapOnCCCP where the KV
	// service serves the configs (not a memcached bucket), keeps it off.
	// Connection string: bootstrap_on=both|cccp|http (all,
	// libcouchbase's name, is both). couchbase:// and
	// couchbases:// only.
	BootstrapOn BootstrapOn
	// DisableDNSSRV turns off the DNS SRV lookup of a connection string's
	// single host given without a port (see ConnStr.SRVHost): the host is
	// then dialed as written. Connection string: enable_dns_srv=false.
	DisableDNSSRV bool
	// Resolver answers the DNS SRV lookup; nil means net.DefaultResolver,
	// which follows the machine's resolver configuration. The lookup takes
	// at most half of ConnectTimeout; a name without the record (or whose
	// lookup fails) is dialed as written, and Connect's error then names
	// the record looked up and why it gave no seeds (ConnectError.SRV).
	// When the record gave the seeds, it is looked up again while no node
	// of the cluster's config can be reached (at most once per 10 s, each
	// lookup within 5 s of Clock, and ended by Close): a cluster that
	// moved is found at the targets it publishes there. When the configs
	// come from the cluster manager over HTTP (BootstrapOnHTTP, or
	// BootstrapOnBoth that fell back to it), it is looked up again while
	// no node serves the config stream, on the same terms, and the stream
	// reads from the targets' REST ports (8091, or 18091 with TLS, for a
	// target at 11210, or 11207) too, until a node of the config serves
	// it again. These bounds hold
	// only for a Resolver that returns when its context ends (as
	// *net.Resolver does): one that ignores it holds Connect, and Close,
	// until it returns.
	Resolver Resolver
	// Memcached configures how memcached:// and memcacheds:// treat servers
	// that cannot be reached; other schemes ignore it.
	Memcached MemcachedOptions
	// Compression configures snappy for values sent; received snappy
	// values are always decompressed.
	Compression CompressionOptions
	// HealthCheck configures how a connection finds out that its node
	// stopped answering.
	HealthCheck HealthCheckOptions
	// Network chooses between a node's default and alternate addresses:
	// "auto" (default) picks "external" when the bootstrap host is an
	// external alternate address, "default" otherwise.
	Network string
	// ConfigPollInterval is how often the cluster config is polled with
	// GET_CLUSTER_CONFIG: at least 10 ms. Default 2.5 s. Configs also arrive in
	// NOT_MY_VBUCKET bodies and, when the server offers them, in push
	// notifications; a node that answers NOT_MY_VBUCKET without a newer
	// config is asked for its config at once (at most every 20 ms). A poll
	// is not sent behind a synchronous write waiting for replication: under
	// unordered execution GET_CLUSTER_CONFIG would wait for it and hold
	// every later request on the connection. It goes to another node, or
	// waits until the write is answered, at most its durability timeout.
	ConfigPollInterval time.Duration
	// DisableMutationTokens stops asking for sequence numbers on mutations.
	DisableMutationTokens bool
	// ClientName is the client's agent: what HELLO reports (the server
	// logs it for these connections), the User-Agent of its requests to
	// the cluster manager, and the sdk of its diagnostics reports.
	// Default "kvwire". Connect refuses one with a control character
	// other than a tab, or invalid UTF-8 (ErrInvalidArgument).
	ClientName string
	// Observer, when set, sees every attempt that is sent to a node (see
	// Observer for those that are not).
	Observer Observer
	// MaxPendingPerConnection bounds requests in flight per connection;
	// past it an attempt waits and retries. Default 4096.
	MaxPendingPerConnection int
	// Transcoder decodes values for GetResult.ContentAs and encodes them
	// for UpsertValue, InsertValue and ReplaceValue. Default
	// JSONTranscoder, which decodes by the Couchbase common flags.
	Transcoder Transcoder
	// Tracer receives a span for every operation, with a child span for
	// each request sent and for encoding, RFC 0067's attributes and an
	// event per retry (see RequestTracer; the module
	// github.com/kvwire/kvwire/kvotel adapts OpenTelemetry). nil means
	// NoopTracer, which costs an operation nothing. An operation's parent
	// span is its options' ParentSpan, else ContextWithParentSpan's.
	Tracer RequestTracer
	// Meter records each operation's latency by service, operation,
	// bucket, scope, collection and outcome (MetricOperationDuration; see
	// Meter; kvotel adapts OpenTelemetry). nil means the logging meter
	// (LoggingMeter), or nothing when LoggingMeter.Disabled.
	Meter Meter
	// ThresholdLogging configures the slow-operation report, on by
	// default: every 10 s, the operations that took over 500 ms, logged
	// at warn.
	ThresholdLogging ThresholdLoggingOptions
	// OrphanReporting configures the orphan report, on by default: every
	// 10 s, the answers that arrived after their operation had given up,
	// logged at warn.
	OrphanReporting OrphanReportingOptions
	// LoggingMeter configures the logging meter, the Meter used when
	// Meter is nil: every 10 minutes, each operation's latency
	// percentiles, logged at info.
	LoggingMeter LoggingMeterOptions
	// Clock gives the time and the timers of deadlines, retry waits,
	// config polling, a node's waits between redials and the connections'
	// health check (see Clock); nil means the real clock. Tests set a fake one; with a Clock nobody
	// advances, a node whose dial failed is never dialed again.
	Clock Clock

	// restAddr, when set (this package's tests), gives the cluster
	// manager's address of a KV address in place of the scheme's default
	// ports (httpconfig.Source.RESTAddr): a mock cluster's nodes listen
	// on ports of their own.
	restAddr func(kv string) (string, bool)
}

// CompressionOptions configure snappy compression of values sent.
type CompressionOptions struct {
	// Disabled turns compression of sent values off.
	Disabled bool
	// MinSize is the smallest value worth compressing. Default 32 bytes.
	MinSize int
	// MinRatio: a compressed value is sent only when its size divided by
	// the original's is at most this, in (0, 1]. Default 0.83.
	MinRatio float64
}

// HealthCheckOptions configure how a connection finds out that its node
// stopped answering (a paused process, a black hole in the network): what
// it then does is close the connection with ErrUnresponsive, failing its
// requests in flight as any dead connection does, and redial. A slow node
// is not closed: only a node that answers nothing at all, not even a NOOP,
// while the connection waits ProbeTimeout.
type HealthCheckOptions struct {
	// ProbeAfter: a request whose caller gave up after it was sent (its
	// timeout or context ended) and still unanswered ProbeAfter later
	// makes the connection probe the node with a NOOP; so does a pile of
	// such requests. A durable write is due ProbeAfter after its
	// durability timeout, and while one is pending the probe waits until
	// it is answered or that timeout has passed (the server runs the NOOP
	// only after the write). 0
	// means DefaultProbeAfter (1 s). Connection string: probe_after.
	ProbeAfter time.Duration
	// ProbeTimeout: a probe unanswered while nothing at all arrives from
	// the node for ProbeTimeout (and the connection makes no other
	// progress: the socket taking the bytes before the probe, or, on
	// Linux, its queue draining to the node up to the probe) closes the
	// connection with ErrUnresponsive, and the node redials. A connection being
	// bootstrapped (by Connect or a redial) that hears nothing for
	// ProbeTimeout while one of its requests waits fails the same way, and
	// is dialed again (Connect: within ConnectTimeout); a login (SASL_AUTH,
	// which kv_engine may check against LDAP for seconds) is bounded by
	// ConnectTimeout only. A node whose answers
	// may be delayed longer than this by its own load, or by the machine's
	// (a server in the same process, as in tests), needs a longer one. 0
	// means DefaultProbeTimeout (1 s). Connection string: probe_timeout.
	ProbeTimeout time.Duration
	// Disabled turns the probes off: a request given up after it was sent
	// then never makes the connection check its node, and a node that
	// stops answering without closing the connection holds its requests
	// until each one's timeout, every time, instead of being redialed.
	// It is for a server known to keep answers back longer than any
	// ProbeTimeout would allow. It turns off the bootstrap's silence watch
	// too: a node that accepts a connection and answers nothing then holds
	// a dial for what is left of ConnectTimeout (Connect's share of it for
	// a seed; a whole ConnectTimeout for each node the recovery asks for a
	// config) instead of ProbeTimeout. Connection string:
	// health_check=false.
	Disabled bool
}

// ThresholdLoggingOptions configure the slow-operation report (RFC 0067's
// threshold logging): every Interval, the operations of each service that
// took longer than its threshold are counted, and the SampleSize slowest
// logged through Options.Logger at warn, with their total, encoding,
// dispatch and server durations, the last connection's local id and
// sockets and the request's opaque (never a key, a value or a password):
//
//	kvwire: operations over threshold report={"kv":{"total_count":3,"top_requests":[{...},...]}}
//
// (ThresholdReportMessage). An interval without one logs nothing; Close
// logs what is left. It reads each operation's own timings, so it works
// under any Tracer, NoopTracer included, and costs an operation under the
// threshold a comparison.
type ThresholdLoggingOptions struct {
	// Disabled turns the report off. Connection string:
	// enable_tracing=false.
	Disabled bool
	// Interval between reports. 0 means DefaultThresholdInterval (10 s);
	// at least 10 ms. Connection string:
	// tracing_threshold_queue_flush_interval.
	Interval time.Duration
	// KVThreshold is the key-value service's threshold. 0 means
	// DefaultKVThreshold (500 ms). Connection string:
	// tracing_threshold_kv.
	KVThreshold time.Duration
	// SampleSize is how many operations of each service a report shows,
	// 1..1024. 0 means DefaultThresholdSampleSize (10). Connection
	// string: tracing_threshold_queue_size.
	SampleSize int
}

// OrphanReportingOptions configure the orphan report (RFC 0067's orphaned
// response reporting): an answer that arrives after its operation gave up
// (a timeout or a cancelled context after the request was written; a
// batch's and a ping's requests included) is an orphan. Every Interval the
// orphans are counted and the SampleSize slowest logged at warn with the
// slow-operation report's fields, their total running from the request's
// dispatch to the late answer (OrphanReportMessage). The connection's
// reader records an orphan in a sample under a lock (no allocation, no
// code of the caller's); the report is logged from a goroutine of its
// own.
type OrphanReportingOptions struct {
	// Disabled turns the report off. Connection string:
	// orphaned_response_logging=false.
	Disabled bool
	// Interval between reports. 0 means DefaultOrphanInterval (10 s); at
	// least 10 ms. Connection string:
	// tracing_orphaned_queue_flush_interval.
	Interval time.Duration
	// SampleSize is how many orphans a report shows, 1..1024. 0 means
	// DefaultOrphanSampleSize (10). Connection string:
	// tracing_orphaned_queue_size.
	SampleSize int
}

// LoggingMeterOptions configure the logging meter (RFC 0067's
// LoggingMeter), the Meter a client uses when Options.Meter is nil: it
// keeps a latency histogram per service and operation and logs, at info
// every Interval, each one's count and 50th, 90th, 99th, 99.9th and 100th
// percentiles in microseconds (LoggingMeterMessage). It is on by default,
// as RFC 0067 and the official SDKs have it: recording costs an operation
// two atomic additions, and the log is one line per Interval.
type LoggingMeterOptions struct {
	// Disabled turns the logging meter off (with Options.Meter nil, no
	// metric is then recorded). Connection string: enable_metrics=false.
	Disabled bool
	// Interval between reports. 0 means DefaultLoggingMeterInterval (10
	// minutes); at least 10 ms. Connection string: metrics_emit_interval.
	Interval time.Duration
}

// MemcachedOptions configure what a memcached:// client does about servers
// it cannot reach. Whatever they say, a key whose server has no connection,
// and whose last connection attempt failed (refused, timed out, TLS or
// authentication refused), fails at once with ErrNoNodeAvailable naming the
// server, instead of retrying until its timeout; the server is redialed in
// the background with back-off (10 ms doubling to 2 s) and takes its keys
// again once a connection attempt succeeds.
type MemcachedOptions struct {
	// RemoveFailedServers takes a server out of the ketama ring once
	// ServerFailureLimit consecutive connection attempts to it have failed,
	// so that its keys go to the other servers (as misses at first: they
	// do not have those values), and puts it back as soon as a connection
	// attempt succeeds. This is libmemcached's remove_failed_servers
	// (auto-eject); the redial back-off plays the part of its
	// retry_timeout (2 s there). When every server is out, the ring keeps
	// them all and their keys fail at once as above. Off by default
	// (connection string: remove_failed_servers=true): a cache whose
	// servers disagree about who holds a key can serve stale values after
	// the server comes back.
	RemoveFailedServers bool
	// ServerFailureLimit is the number of consecutive failed connection
	// attempts after which RemoveFailedServers takes a server out: at
	// least 1; 0 means DefaultServerFailureLimit (5). Connection string:
	// server_failure_limit.
	ServerFailureLimit int
	// BinaryMultiGet makes GetMany read every server's keys as binary
	// quiet gets (GETQ ... NOOP on the client's connection). Otherwise,
	// on a server reached without TLS and without SASL, GetMany reads
	// them as one text multi-get ("gets k1 k2 ...") on a text connection
	// of its own (two at once for a GetMany of more keys than it keeps in
	// flight, whose windows overlap; see GetMany): memcached serves at
	// most -R requests of a connection per event-loop turn (20 by
	// default), and a multi-get is one request where 256 quiet gets are
	// 256, so the text multi-get is about twice as fast on a default
	// memcached (make bench). memcached 1.6 also
	// deprecated the binary protocol. Keys the text protocol cannot carry
	// (a space or control character) go as binary gets either way.
	// Connection string: binary_multiget=true.
	BinaryMultiGet bool
}

// resolved fills defaults and applies the connection string's options.
func (o Options) resolved(cs *ConnStr) (Options, error) {
	s := o.settings()
	if err := s.MergeBucket(cs.Bucket, settingsErrors); err != nil {
		return o, err
	}
	if v, ok := cs.Options["profile"]; ok {
		o.Profile = ConfigProfile(v)
	}
	var profile Options
	if o.Profile != "" {
		var err error
		if profile, err = o.Profile.Defaults(); err != nil {
			if _, ok := cs.Options["profile"]; ok {
				return o, &ConnStrError{Input: "profile=" + string(o.Profile), Reason: fmt.Sprintf("unknown configuration profile (known: %s)", ProfileWANDevelopment)}
			}
			return o, err
		}
	}
	if err := s.Resolve(cs.internal(), defaults(profile), settingsErrors); err != nil {
		return o, err
	}
	o.setSettings(&s)
	if o.RetryStrategy == nil {
		o.RetryStrategy = DefaultRetryStrategy()
	}
	if o.Transcoder == nil {
		o.Transcoder = JSONTranscoder{}
	}
	return o, nil
}

// settingsErrors make internal/settings' errors this package's.
var settingsErrors = settings.Errors{
	Invalid: ErrInvalidArgument,
	ConnStr: func(input, reason string) error { return &ConnStrError{Input: input, Reason: reason} },
}

// defaults are the defaults of the settings left zero: profile's where it
// has one, else the package's.
func defaults(profile Options) settings.Defaults {
	return settings.Defaults{
		KVTimeout:            cmp.Or(profile.KVTimeout, DefaultKVTimeout),
		ConnectTimeout:       cmp.Or(profile.ConnectTimeout, DefaultConnectTimeout),
		ConfigPollInterval:   DefaultConfigPollInterval,
		CompressionMinSize:   DefaultCompressionMinSize,
		CompressionMinRatio:  DefaultCompressionMinRatio,
		ServerFailureLimit:   DefaultServerFailureLimit,
		ProbeAfter:           DefaultProbeAfter,
		ProbeTimeout:         DefaultProbeTimeout,
		ThresholdInterval:    DefaultThresholdInterval,
		KVThreshold:          DefaultKVThreshold,
		ThresholdSampleSize:  DefaultThresholdSampleSize,
		OrphanInterval:       DefaultOrphanInterval,
		OrphanSampleSize:     DefaultOrphanSampleSize,
		LoggingMeterInterval: DefaultLoggingMeterInterval,
		Network:              NetworkAuto,
	}
}

// settings are o's plain values, as internal/settings resolves them.
func (o *Options) settings() settings.Settings {
	return settings.Settings{
		Bucket:                   o.Bucket,
		KVTimeout:                o.KVTimeout,
		ConnectTimeout:           o.ConnectTimeout,
		ConnectionsPerNode:       o.ConnectionsPerNode,
		NMVRetryInterval:         o.NMVRetryInterval,
		Logger:                   o.Logger,
		TLSConfig:                o.TLSConfig,
		AllowPlainAuthWithoutTLS: o.AllowPlainAuthWithoutTLS,
		BootstrapOn:              string(o.BootstrapOn),
		DisableDNSSRV:            o.DisableDNSSRV,
		Memcached:                settings.Memcached(o.Memcached),
		Compression:              settings.Compression(o.Compression),
		HealthCheck:              settings.HealthCheck(o.HealthCheck),
		Network:                  o.Network,
		ConfigPollInterval:       o.ConfigPollInterval,
		DisableMutationTokens:    o.DisableMutationTokens,
		ClientName:               o.ClientName,
		MaxPendingPerConnection:  o.MaxPendingPerConnection,
		ThresholdLogging:         settings.ThresholdLogging(o.ThresholdLogging),
		OrphanReporting:          settings.OrphanReporting(o.OrphanReporting),
		LoggingMeter:             settings.LoggingMeter(o.LoggingMeter),
	}
}

// setSettings sets o's plain values to s's.
func (o *Options) setSettings(s *settings.Settings) {
	o.Bucket = s.Bucket
	o.KVTimeout = s.KVTimeout
	o.ConnectTimeout = s.ConnectTimeout
	o.ConnectionsPerNode = s.ConnectionsPerNode
	o.NMVRetryInterval = s.NMVRetryInterval
	o.Logger = s.Logger
	o.TLSConfig = s.TLSConfig
	o.AllowPlainAuthWithoutTLS = s.AllowPlainAuthWithoutTLS
	o.BootstrapOn = BootstrapOn(s.BootstrapOn)
	o.DisableDNSSRV = s.DisableDNSSRV
	o.Memcached = MemcachedOptions(s.Memcached)
	o.Compression = CompressionOptions(s.Compression)
	o.HealthCheck = HealthCheckOptions(s.HealthCheck)
	o.Network = s.Network
	o.ConfigPollInterval = s.ConfigPollInterval
	o.DisableMutationTokens = s.DisableMutationTokens
	o.ClientName = s.ClientName
	o.MaxPendingPerConnection = s.MaxPendingPerConnection
	o.ThresholdLogging = ThresholdLoggingOptions(s.ThresholdLogging)
	o.OrphanReporting = OrphanReportingOptions(s.OrphanReporting)
	o.LoggingMeter = LoggingMeterOptions(s.LoggingMeter)
}
