// Package settings resolves a client's settings for Connect: the
// connection string's options over the caller's values, each checked
// against its range (a value out of it is refused with an error naming it,
// never replaced by a default), then every setting left zero given its
// default, TLS set up as the scheme says, and the bucket checked against
// the scheme. Settings are the plain values of client.Options; the client
// copies them in and out, and fills the defaults of its own types.
package settings

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kvwire/kvwire/internal/capella"
	"github.com/kvwire/kvwire/internal/connstr"
)

// Settings are the fields of client.Options that Resolve reads and fills,
// under the same names; client.Options documents each.
type Settings struct {
	Bucket                   string
	KVTimeout                time.Duration
	ConnectTimeout           time.Duration
	ConnectionsPerNode       int
	NMVRetryInterval         time.Duration
	Logger                   *slog.Logger
	TLSConfig                *tls.Config
	AllowPlainAuthWithoutTLS bool
	BootstrapOn              string
	DisableDNSSRV            bool
	Memcached                Memcached
	Compression              Compression
	HealthCheck              HealthCheck
	Network                  string
	ConfigPollInterval       time.Duration
	DisableMutationTokens    bool
	ClientName               string
	MaxPendingPerConnection  int
	ThresholdLogging         ThresholdLogging
	OrphanReporting          OrphanReporting
	LoggingMeter             LoggingMeter
}

// Compression, HealthCheck, ThresholdLogging, OrphanReporting,
// LoggingMeter and Memcached have the fields of client's
// CompressionOptions, ... in their order, so that the client converts
// them (and the compiler checks that they still match).
type (
	Compression struct {
		Disabled bool
		MinSize  int
		MinRatio float64
	}
	HealthCheck struct {
		ProbeAfter   time.Duration
		ProbeTimeout time.Duration
		Disabled     bool
	}
	ThresholdLogging struct {
		Disabled    bool
		Interval    time.Duration
		KVThreshold time.Duration
		SampleSize  int
	}
	OrphanReporting struct {
		Disabled   bool
		Interval   time.Duration
		SampleSize int
	}
	LoggingMeter struct {
		Disabled bool
		Interval time.Duration
	}
	Memcached struct {
		RemoveFailedServers bool
		ServerFailureLimit  int
		BinaryMultiGet      bool
	}
)

// Defaults are the values a setting left zero gets: the client's
// Default... constants, a configuration profile's where it has one.
type Defaults struct {
	KVTimeout            time.Duration
	ConnectTimeout       time.Duration
	ConfigPollInterval   time.Duration
	CompressionMinSize   int
	CompressionMinRatio  float64
	ServerFailureLimit   int
	ProbeAfter           time.Duration
	ProbeTimeout         time.Duration
	ThresholdInterval    time.Duration
	KVThreshold          time.Duration
	ThresholdSampleSize  int
	OrphanInterval       time.Duration
	OrphanSampleSize     int
	LoggingMeterInterval time.Duration
	Network              string
}

// Errors make Resolve's errors of the caller's types.
type Errors struct {
	// Invalid is wrapped by every error about a setting given
	// (client.ErrInvalidArgument).
	Invalid error
	// ConnStr is the error about a connection-string option; input is
	// "name=value" (a client.ConnStrError).
	ConnStr func(input, reason string) error
}

// connStr is err, a *connstr.Error of an option's reader, made the
// caller's type.
func (e Errors) connStr(err error) error {
	var ce *connstr.Error
	if errors.As(err, &ce) {
		return e.ConnStr(ce.Input, ce.Reason)
	}
	return err
}

// The values of BootstrapOn (client.BootstrapOnBoth, ...).
const (
	BootstrapOnBoth = "both"
	BootstrapOnCCCP = "cccp"
	BootstrapOnHTTP = "http"
)

// MergeBucket takes the connection string's bucket (csBucket, "" for
// none) into s, refusing one that differs from s.Bucket.
func (s *Settings) MergeBucket(csBucket string, e Errors) error {
	if csBucket != "" {
		if s.Bucket != "" && s.Bucket != csBucket {
			return fmt.Errorf("%w: bucket %q in the connection string and %q in Options", e.Invalid, csBucket, s.Bucket)
		}
		s.Bucket = csBucket
	}
	return nil
}

// Resolve applies cs's options to s (cs's bucket already merged into
// s.Bucket by MergeBucket), checks every setting against its range and the scheme, and
// fills those left zero from d. Its errors are made by e.
func (s *Settings) Resolve(cs *connstr.ConnStr, d Defaults, e Errors) error {
	if err := s.applyNumbers(cs, e); err != nil {
		return err
	}
	if err := s.applyBools(cs, e); err != nil {
		return err
	}
	if v, ok := cs.Options["network"]; ok {
		s.Network = v
	}
	if err := s.applyBootstrapOn(cs, e); err != nil {
		return err
	}
	if err := s.applyTLS(cs, e); err != nil {
		return err
	}
	if err := s.checkNumbers(e); err != nil {
		return err
	}
	if err := s.checkClientName(e); err != nil {
		return err
	}
	s.fillDefaults(d)
	if cs.Scheme.IsTLS() && s.TLSConfig == nil {
		s.TLSConfig = &tls.Config{}
	}
	if cs.Scheme == connstr.Couchbases {
		var err error
		if s.TLSConfig, err = capella.WithRoots(s.TLSConfig); err != nil {
			s.Logger.Warn("kvwire: couchbases:// without Capella's root CA: only the system roots are trusted", "err", err)
		}
	}
	if cs.Scheme.IsMemcached() && s.Bucket != "" {
		return fmt.Errorf("%w: %s:// has no buckets", e.Invalid, cs.Scheme)
	}
	if !cs.Scheme.IsMemcached() && s.Bucket == "" {
		// Without a bucket the node serves no vbucket map: every operation
		// would wait for one until its timeout.
		return fmt.Errorf("%w: no bucket: put it in the connection string's path (%s://host/bucket) or in Options.Bucket", e.Invalid, cs.Scheme)
	}
	return nil
}

// applyBools reads the boolean connection-string options into s.
func (s *Settings) applyBools(cs *connstr.ConnStr, e Errors) error {
	for _, b := range []struct {
		name   string
		dst    *bool
		invert bool // the option says the opposite of the field
	}{
		{"compression", &s.Compression.Disabled, true},
		{"enable_mutation_tokens", &s.DisableMutationTokens, true},
		{"health_check", &s.HealthCheck.Disabled, true},
		{"allow_plain_auth", &s.AllowPlainAuthWithoutTLS, false},
		{"remove_failed_servers", &s.Memcached.RemoveFailedServers, false},
		{"binary_multiget", &s.Memcached.BinaryMultiGet, false},
		{"enable_tracing", &s.ThresholdLogging.Disabled, true},
		{"orphaned_response_logging", &s.OrphanReporting.Disabled, true},
		{"enable_metrics", &s.LoggingMeter.Disabled, true},
		{"enable_dns_srv", &s.DisableDNSSRV, true},
	} {
		v, ok, err := cs.Options.Bool(b.name)
		if err != nil {
			return e.connStr(err)
		}
		if ok {
			*b.dst = v != b.invert
		}
	}
	return nil
}

// applyTLS checks the TLS settings against the scheme and applies the
// connection string's tls_verify.
func (s *Settings) applyTLS(cs *connstr.ConnStr, e Errors) error {
	if !cs.Scheme.IsTLS() {
		// TLS follows the scheme: a TLS setting on a plaintext scheme is
		// a mistake that would otherwise surface as a handshake failure
		// against a plaintext port, or as a connection the caller believes
		// is encrypted.
		use := connstr.Couchbases
		if cs.Scheme.IsMemcached() {
			use = connstr.Memcacheds
		}
		if s.TLSConfig != nil {
			return fmt.Errorf("%w: Options.TLSConfig is set but %s:// does not use TLS; use %s:// for TLS", e.Invalid, cs.Scheme, use)
		}
		if v, ok := cs.Options["tls_verify"]; ok {
			return fmt.Errorf("%w: %w", e.Invalid, e.ConnStr("tls_verify="+v,
				fmt.Sprintf("%s:// does not use TLS; use %s:// for TLS", cs.Scheme, use)))
		}
	}
	if v, ok := cs.Options["tls_verify"]; ok {
		switch v {
		case "peer":
		case "none":
			if s.TLSConfig == nil {
				s.TLSConfig = &tls.Config{}
			} else {
				s.TLSConfig = s.TLSConfig.Clone()
			}
			s.TLSConfig.InsecureSkipVerify = true
		default:
			return e.ConnStr("tls_verify="+v, "want peer or none")
		}
	}
	return nil
}

// fillDefaults gives every field left zero its default (d: the profile's
// where it has one, else the package's).
func (s *Settings) fillDefaults(d Defaults) {
	if s.KVTimeout <= 0 {
		s.KVTimeout = d.KVTimeout
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = d.ConnectTimeout
	}
	if s.ConfigPollInterval <= 0 {
		s.ConfigPollInterval = d.ConfigPollInterval
	}
	if s.ConnectionsPerNode <= 0 {
		s.ConnectionsPerNode = 1
	}
	if s.Memcached.ServerFailureLimit <= 0 {
		s.Memcached.ServerFailureLimit = d.ServerFailureLimit
	}
	if s.HealthCheck.ProbeAfter <= 0 {
		s.HealthCheck.ProbeAfter = d.ProbeAfter
	}
	if s.HealthCheck.ProbeTimeout <= 0 {
		s.HealthCheck.ProbeTimeout = d.ProbeTimeout
	}
	s.ThresholdLogging.Interval = cmp.Or(s.ThresholdLogging.Interval, d.ThresholdInterval)
	s.ThresholdLogging.KVThreshold = cmp.Or(s.ThresholdLogging.KVThreshold, d.KVThreshold)
	s.ThresholdLogging.SampleSize = cmp.Or(s.ThresholdLogging.SampleSize, d.ThresholdSampleSize)
	s.OrphanReporting.Interval = cmp.Or(s.OrphanReporting.Interval, d.OrphanInterval)
	s.OrphanReporting.SampleSize = cmp.Or(s.OrphanReporting.SampleSize, d.OrphanSampleSize)
	s.LoggingMeter.Interval = cmp.Or(s.LoggingMeter.Interval, d.LoggingMeterInterval)
	if s.Compression.MinSize <= 0 {
		s.Compression.MinSize = d.CompressionMinSize
	}
	if s.Compression.MinRatio <= 0 || s.Compression.MinRatio > 1 {
		s.Compression.MinRatio = d.CompressionMinRatio
	}
	if s.Network == "" {
		// Configs may name other alternate networks than auto, default
		// and external: any is taken as given.
		s.Network = d.Network
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.ClientName == "" {
		s.ClientName = "kvwire"
	}
}

// validBootstrapOn reports whether b is one of BootstrapOn's values.
func validBootstrapOn(b string) bool {
	switch b {
	case BootstrapOnBoth, BootstrapOnCCCP, BootstrapOnHTTP:
		return true
	}
	return false
}

// applyBootstrapOn reads bootstrap_on into s, fills BootstrapOn's default
// and refuses settings that could not bootstrap: HTTP with memcached://,
// and =http hosts that the setting would leave unused.
func (s *Settings) applyBootstrapOn(cs *connstr.ConnStr, e Errors) error {
	if v, ok := cs.Options["bootstrap_on"]; ok {
		s.BootstrapOn = strings.ToLower(v)
		if s.BootstrapOn == "all" {
			// libcouchbase's name for its default, CCCP then HTTP.
			s.BootstrapOn = BootstrapOnBoth
		}
		if !validBootstrapOn(s.BootstrapOn) {
			return e.ConnStr("bootstrap_on="+v, "want both, cccp or http")
		}
	}
	if s.BootstrapOn == "" {
		s.BootstrapOn = BootstrapOnBoth
	}
	if !validBootstrapOn(s.BootstrapOn) {
		return fmt.Errorf("%w: Options.BootstrapOn = %q: want %q, %q or %q", e.Invalid, s.BootstrapOn,
			BootstrapOnBoth, BootstrapOnCCCP, BootstrapOnHTTP)
	}
	switch {
	case cs.Scheme.IsMemcached() && s.BootstrapOn != BootstrapOnBoth:
		return fmt.Errorf("%w: bootstrap_on=%s: %s:// has no cluster configs", e.Invalid, s.BootstrapOn, cs.Scheme)
	case s.BootstrapOn == BootstrapOnCCCP && len(cs.HTTPHosts) > 0:
		return fmt.Errorf("%w: bootstrap_on=cccp reads no config over HTTP, so the =http hosts %v would not be used", e.Invalid, cs.HTTPHosts)
	}
	return nil
}

// Ranges of numeric settings, for connection-string options and the
// Options fields they fill alike.
const (
	// minConfigPollInterval keeps a mistyped poll interval from turning
	// the config loop into a busy loop against the cluster.
	minConfigPollInterval = 10 * time.Millisecond
	// maxConnectionsPerNode bounds a pool: one pipelined connection
	// carries a lot, and a typo should not open thousands of sockets.
	maxConnectionsPerNode = 256
	// minReportInterval keeps a mistyped report interval from logging in
	// a busy loop.
	minReportInterval = 10 * time.Millisecond
	// maxReportSampleSize bounds a report's sample, which is allocated
	// whole when the report starts.
	maxReportSampleSize = 1024
)

// applyNumbers reads the numeric connection-string options into s. A value
// out of its option's range is an Errors.ConnStr error naming the option and the
// value, never silently replaced by a default.
func (s *Settings) applyNumbers(cs *connstr.ConnStr, e Errors) error {
	bad := func(name, reason string) error {
		return e.ConnStr(name+"="+cs.Options[name], reason)
	}
	if err := s.applyDurations(cs, e, bad); err != nil {
		return err
	}
	if n, ok, err := cs.Options.Int("kv_pool_size"); err != nil {
		return e.connStr(err)
	} else if ok {
		if n < 1 || n > maxConnectionsPerNode {
			return bad("kv_pool_size", fmt.Sprintf("connections per node must be in 1..%d", maxConnectionsPerNode))
		}
		s.ConnectionsPerNode = n
	}
	if n, ok, err := cs.Options.Int("compression_min_size"); err != nil {
		return e.connStr(err)
	} else if ok {
		if n < 1 {
			return bad("compression_min_size", "must be at least 1 byte (1 compresses every value worth it)")
		}
		s.Compression.MinSize = n
	}
	if n, ok, err := cs.Options.Int("server_failure_limit"); err != nil {
		return e.connStr(err)
	} else if ok {
		if n < 1 {
			return bad("server_failure_limit", "must be at least 1 failed connection attempt")
		}
		s.Memcached.ServerFailureLimit = n
	}
	for _, q := range []struct {
		name string
		dst  *int
	}{
		{"tracing_threshold_queue_size", &s.ThresholdLogging.SampleSize},
		{"tracing_orphaned_queue_size", &s.OrphanReporting.SampleSize},
	} {
		if n, ok, err := cs.Options.Int(q.name); err != nil {
			return e.connStr(err)
		} else if ok {
			if n < 1 || n > maxReportSampleSize {
				return bad(q.name, fmt.Sprintf("a report's sample size must be in 1..%d", maxReportSampleSize))
			}
			*q.dst = n
		}
	}
	if f, ok, err := cs.Options.Float("compression_min_ratio"); err != nil {
		return e.connStr(err)
	} else if ok {
		if !(f > 0 && f <= 1) {
			return bad("compression_min_ratio", "must be in (0, 1]: the largest compressed/original size ratio worth sending")
		}
		s.Compression.MinRatio = f
	}
	return nil
}

// applyDurations reads the connection-string options that are durations
// into s (applyNumbers; bad makes its error).
func (s *Settings) applyDurations(cs *connstr.ConnStr, e Errors, bad func(name, reason string) error) error {
	durations := []struct {
		name string
		dst  *time.Duration
		min  time.Duration // smallest value accepted
	}{
		{"kv_timeout", &s.KVTimeout, 1},
		{"connect_timeout", &s.ConnectTimeout, 1},
		{"config_poll_interval", &s.ConfigPollInterval, minConfigPollInterval},
		{"nmv_retry_interval", &s.NMVRetryInterval, 0},
		{"probe_after", &s.HealthCheck.ProbeAfter, 1},
		{"probe_timeout", &s.HealthCheck.ProbeTimeout, 1},
		{"tracing_threshold_kv", &s.ThresholdLogging.KVThreshold, 1},
		{"tracing_threshold_queue_flush_interval", &s.ThresholdLogging.Interval, minReportInterval},
		{"tracing_orphaned_queue_flush_interval", &s.OrphanReporting.Interval, minReportInterval},
		{"metrics_emit_interval", &s.LoggingMeter.Interval, minReportInterval},
	}
	for _, d := range durations {
		v, ok, err := cs.Options.Duration(d.name)
		if err != nil {
			return e.connStr(err)
		}
		if !ok {
			continue
		}
		if v < d.min {
			if d.min == 1 {
				return bad(d.name, "must be positive")
			}
			return bad(d.name, "must be at least "+d.min.String())
		}
		*d.dst = v
	}
	return nil
}

// checkClientName refuses a ClientName that cannot be sent as it is: it
// is HELLO's agent (JSON, where invalid UTF-8 would be replaced) and the
// User-Agent header of every request to the cluster manager, where a
// control character other than a tab is no valid header value (Go's HTTP
// client refuses the request; RFC 9110 allows HTAB in a field value).
func (s *Settings) checkClientName(e Errors) error {
	if !utf8.ValidString(s.ClientName) {
		return fmt.Errorf("%w: Options.ClientName %q: not valid UTF-8", e.Invalid, s.ClientName)
	}
	if i := strings.IndexFunc(s.ClientName, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("%w: Options.ClientName %q: a control character at byte %d (it is sent as an HTTP User-Agent and HELLO's agent)",
			e.Invalid, s.ClientName, i)
	}
	return nil
}

// checkNumbers refuses Options fields out of range. Zero means the
// default everywhere; other values are taken as given or refused, never
// replaced.
func (s *Settings) checkNumbers(e Errors) error {
	bad := func(field string, v any, reason string) error {
		return fmt.Errorf("%w: Options.%s = %v: %s", e.Invalid, field, v, reason)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"KVTimeout", s.KVTimeout},
		{"ConnectTimeout", s.ConnectTimeout},
		{"ConfigPollInterval", s.ConfigPollInterval},
		{"NMVRetryInterval", s.NMVRetryInterval},
		{"HealthCheck.ProbeAfter", s.HealthCheck.ProbeAfter},
		{"HealthCheck.ProbeTimeout", s.HealthCheck.ProbeTimeout},
		{"ThresholdLogging.KVThreshold", s.ThresholdLogging.KVThreshold},
	} {
		if d.v < 0 {
			return bad(d.field, d.v, "negative")
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"ThresholdLogging.Interval", s.ThresholdLogging.Interval},
		{"OrphanReporting.Interval", s.OrphanReporting.Interval},
		{"LoggingMeter.Interval", s.LoggingMeter.Interval},
	} {
		if d.v < 0 || (d.v > 0 && d.v < minReportInterval) {
			return bad(d.field, d.v, "must be at least "+minReportInterval.String()+" (0: the default)")
		}
	}
	for _, q := range []struct {
		field string
		v     int
	}{
		{"ThresholdLogging.SampleSize", s.ThresholdLogging.SampleSize},
		{"OrphanReporting.SampleSize", s.OrphanReporting.SampleSize},
	} {
		if q.v < 0 || q.v > maxReportSampleSize {
			return bad(q.field, q.v, fmt.Sprintf("must be in 1..%d (0: the default, 10)", maxReportSampleSize))
		}
	}
	if s.ConfigPollInterval > 0 && s.ConfigPollInterval < minConfigPollInterval {
		return bad("ConfigPollInterval", s.ConfigPollInterval, "must be at least "+minConfigPollInterval.String())
	}
	if s.ConnectionsPerNode < 0 || s.ConnectionsPerNode > maxConnectionsPerNode {
		return bad("ConnectionsPerNode", s.ConnectionsPerNode, fmt.Sprintf("must be in 1..%d (0: the default, 1)", maxConnectionsPerNode))
	}
	if s.Compression.MinSize < 0 {
		return bad("Compression.MinSize", s.Compression.MinSize, "negative")
	}
	if r := s.Compression.MinRatio; r != 0 && !(r > 0 && r <= 1) {
		return bad("Compression.MinRatio", r, "must be in (0, 1] (0: the default, 0.83)")
	}
	if s.Memcached.ServerFailureLimit < 0 {
		return bad("Memcached.ServerFailureLimit", s.Memcached.ServerFailureLimit, "negative (0: the default, 5)")
	}
	if s.MaxPendingPerConnection < 0 {
		return bad("MaxPendingPerConnection", s.MaxPendingPerConnection, "negative")
	}
	return nil
}
