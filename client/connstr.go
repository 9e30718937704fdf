package client

import (
	"fmt"
	"time"

	"github.com/kvwire/kvwire/internal/connstr"
)

// Scheme is the scheme of a connection string.
type Scheme string

// Connection-string schemes.
const (
	// SchemeCouchbase connects to Couchbase Server's KV service over TCP
	// (default port 11210).
	SchemeCouchbase Scheme = "couchbase"
	// SchemeCouchbases connects over TLS (default port 11207).
	SchemeCouchbases Scheme = "couchbases"
	// SchemeMemcached connects to plain memcached servers speaking the binary
	// protocol (default port 11211); keys are spread with ketama.
	SchemeMemcached Scheme = "memcached"
	// SchemeMemcacheds is SchemeMemcached over TLS (memcached -Z), with
	// the server's certificate verified (default port 11211, memcached's
	// port with or without TLS).
	SchemeMemcacheds Scheme = "memcacheds"
)

// IsMemcached reports whether s connects to plain memcached servers
// (memcached:// or memcacheds://).
func (s Scheme) IsMemcached() bool { return connstr.Scheme(s).IsMemcached() }

// IsTLS reports whether s connects over TLS (couchbases:// or
// memcacheds://).
func (s Scheme) IsTLS() bool { return connstr.Scheme(s).IsTLS() }

// Default ports per scheme.
const (
	DefaultKVPort        = 11210
	DefaultKVTLSPort     = 11207
	DefaultMemcachedPort = 11211
	// DefaultHTTPPort and DefaultHTTPSPort are the cluster manager's REST
	// ports (mgmt, mgmtSSL): a host:port=http seed without a port, and
	// where a host given without a port is asked for the bucket's config
	// over HTTP (see BootstrapOn).
	DefaultHTTPPort  = 8091
	DefaultHTTPSPort = 18091
)

// ConnStrError says what is wrong with a connection string. Input is the
// string (or the option, "name=value") with any password in it masked as
// "****": connection strings carry none (credentials are Options.Username
// and Options.Password), and one written as user:password@host, or with
// a password or pass option, is refused.
type ConnStrError struct {
	Input  string
	Reason string
}

func (e *ConnStrError) Error() string {
	return fmt.Sprintf("kvwire: invalid connection string %q: %s", e.Input, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConnStr) and errors.Is(err,
// ErrInvalidArgument) true: a bad connection string is a bad argument to
// Connect.
func (e *ConnStrError) Is(target error) bool {
	return target == ErrInvalidConnStr || target == ErrInvalidArgument
}

// ConnStr is a parsed connection string:
//
//	couchbase://h1,h2:11210/bucket?kv_timeout=2500ms&network=external
//	couchbases://cb.example.cloud                (a DNS SRV name: see SRVHost)
//	couchbase://h1:8091=http,h2:8091=http/bucket (the cluster manager's REST ports)
//	couchbase://h1:11210=mcd,h1:8091=http/bucket
//	memcached://h1:11211,h2?remove_failed_servers=true
//	memcacheds://h1
//
// A host of a couchbase:// or couchbases:// string may carry RFC 0011's
// type: "=mcd" (the default) names a KV port, "=http" a cluster manager
// REST port, where the bucket's config is read over HTTP (over HTTPS with
// couchbases://, which also accepts libcouchbase's "=https", and "=mcds"
// for "=mcd").
//
// RFC 0011's http:// scheme is read as couchbase://, as gocbcore reads it:
// a host without a port or at 8091 is a KV seed at DefaultKVPort (whose
// host's port 8091 is asked over HTTP where the KV service serves no
// config), a host at another port an "=http" seed; its hosts take no
// type, and it names no DNS SRV record. Scheme is then SchemeCouchbase
// and String writes couchbase://. https:// is refused (use couchbases://).
type ConnStr struct {
	Scheme Scheme
	// Hosts are the KV (or memcached) seeds: "host:port" addresses, ports
	// defaulted per scheme, IPv6 literals in brackets.
	Hosts []string
	// HTTPHosts are the "=http" seeds: the cluster manager's REST
	// addresses, ports defaulted to DefaultHTTPPort (DefaultHTTPSPort for
	// couchbases://).
	HTTPHosts []string
	// SRVHost is the host of a couchbase:// or couchbases:// string that
	// names one host, without a port or a type, and not an IP address:
	// Connect looks up its DNS SRV record (_couchbase._tcp.SRVHost, or
	// _couchbases._tcp.SRVHost) for the seeds, as SDK RFC 0011 says, unless
	// enable_dns_srv=false (Options.DisableDNSSRV). "" otherwise.
	SRVHost string
	// Bucket is the path, if any.
	Bucket string
	// Options are the query parameters, by name, last value wins; one
	// whose (last) value is empty is refused.
	Options map[string]string
}

// ParseConnStr parses a connection string. A string with no scheme is taken
// as couchbase://, but for its untyped hosts, which RFC 0011 reads as
// http://'s: "h" and the legacy "h:8091" are (as gocbcore and libcouchbase
// read them, and as http://h reads) a KV seed at DefaultKVPort whose
// host's port 8091 is the cluster manager's, couchbase://h:11210, with no
// DNS SRV lookup (RFC 0011 makes one for couchbase:// and couchbases://
// only); "h:PORT" at another port is refused (ErrInvalidConnStr) as
// ambiguous, as gocbcore refuses it: RFC 0011 would make it the cluster
// manager's, while "h:11210" usually means a KV port. Write
// couchbase://h:PORT or http://h:PORT. Every error names what was wrong.
//
// The options (the query parameters) a string may carry, each the
// Options field it sets at Connect (KnownConnStrOptions lists the names;
// any other is refused, and so is an option without a value):
//
//	kv_timeout, connect_timeout                 KVTimeout, ConnectTimeout
//	kv_pool_size                                ConnectionsPerNode (1..256)
//	network                                     Network
//	bucket                                      Bucket (instead of the path)
//	profile=wan_development                     Profile
//	bootstrap_on=both|cccp|http (all: both)     BootstrapOn
//	enable_dns_srv                              DisableDNSSRV (inverted)
//	tls_verify=peer|none                        TLSConfig.InsecureSkipVerify (TLS schemes only)
//	allow_plain_auth                            AllowPlainAuthWithoutTLS
//	compression                                 Compression.Disabled (inverted)
//	compression_min_size, compression_min_ratio Compression.MinSize, MinRatio
//	config_poll_interval                        ConfigPollInterval
//	nmv_retry_interval                          NMVRetryInterval
//	enable_mutation_tokens                      DisableMutationTokens (inverted)
//	health_check                                HealthCheck.Disabled (inverted)
//	probe_after, probe_timeout                  HealthCheck.ProbeAfter, ProbeTimeout
//	remove_failed_servers, server_failure_limit Memcached.RemoveFailedServers, ServerFailureLimit
//	binary_multiget                             Memcached.BinaryMultiGet
//	enable_tracing                              ThresholdLogging.Disabled (inverted)
//	tracing_threshold_kv                        ThresholdLogging.KVThreshold
//	tracing_threshold_queue_flush_interval      ThresholdLogging.Interval
//	tracing_threshold_queue_size                ThresholdLogging.SampleSize
//	orphaned_response_logging                   OrphanReporting.Disabled (inverted)
//	tracing_orphaned_queue_flush_interval       OrphanReporting.Interval
//	tracing_orphaned_queue_size                 OrphanReporting.SampleSize
//	enable_metrics                              LoggingMeter.Disabled (inverted)
//	metrics_emit_interval                       LoggingMeter.Interval
//
// Durations are Go durations ("2.5s") or whole milliseconds; booleans
// true/false/1/0/yes/no/on/off. The memcached:// options
// (remove_failed_servers, server_failure_limit, binary_multiget) are
// refused on other schemes. A value out of its field's range fails
// Connect (a *ConnStrError naming it).
func ParseConnStr(s string) (*ConnStr, error) {
	p, err := connstr.Parse(s)
	if err != nil {
		return nil, connStrError(err)
	}
	return &ConnStr{Scheme: Scheme(p.Scheme), Hosts: p.Hosts, HTTPHosts: p.HTTPHosts, SRVHost: p.SRVHost, Bucket: p.Bucket, Options: p.Options}, nil
}

// internal is cs as the connstr package has it (sharing its slices and
// options).
func (cs *ConnStr) internal() *connstr.ConnStr {
	return &connstr.ConnStr{Scheme: connstr.Scheme(cs.Scheme), Hosts: cs.Hosts, HTTPHosts: cs.HTTPHosts, SRVHost: cs.SRVHost, Bucket: cs.Bucket, Options: cs.Options}
}

// connStrError is err, a *connstr.Error made a *ConnStrError.
func connStrError(err error) error {
	if e, ok := err.(*connstr.Error); ok {
		return &ConnStrError{Input: e.Input, Reason: e.Reason}
	}
	return err
}

// seeds are the hosts given, as a ConnectError names them: the KV seeds,
// then the =http ones with their type.
func (cs *ConnStr) seeds() []string { return cs.internal().Seeds() }

// KnownConnStrOptions lists the option names ParseConnStr accepts.
func KnownConnStrOptions() []string { return connstr.Known() }

// Duration reads a duration option: a Go duration ("2.5s", "2500ms") or a
// whole number of milliseconds, as Couchbase SDKs accept. ok is false when the
// option is absent.
func (cs *ConnStr) Duration(name string) (d time.Duration, ok bool, err error) {
	d, ok, err = connstr.Options(cs.Options).Duration(name)
	return d, ok, connStrError(err)
}

// Int reads an integer option.
func (cs *ConnStr) Int(name string) (n int, ok bool, err error) {
	n, ok, err = connstr.Options(cs.Options).Int(name)
	return n, ok, connStrError(err)
}

// Float reads a floating-point option.
func (cs *ConnStr) Float(name string) (f float64, ok bool, err error) {
	f, ok, err = connstr.Options(cs.Options).Float(name)
	return f, ok, connStrError(err)
}

// Bool reads a boolean option (true/false/1/0/yes/no/on/off).
func (cs *ConnStr) Bool(name string) (b, ok bool, err error) {
	b, ok, err = connstr.Options(cs.Options).Bool(name)
	return b, ok, connStrError(err)
}

// String rebuilds the connection string in canonical form.
func (cs *ConnStr) String() string { return cs.internal().String() }
