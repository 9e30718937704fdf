// Package connstr parses connection strings as SDK RFC 0011 writes them:
// the scheme (couchbase, couchbases, memcached, memcacheds, and RFC
// 0011's http, read as couchbase), the seeds with
// their ports defaulted per scheme and their types (=mcd, =http; with
// couchbases:// also libcouchbase's =mcds and =https), the bucket, and the
// query options (one without a value refused), checked against the options a client
// understands. It also reads an option as a duration, an integer, a float
// or a boolean, and writes a parsed string back in canonical form. Every
// error is an *Error naming what was wrong. The client's public ConnStr and
// ConnStrError are built from these.
package connstr

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Scheme is the scheme of a connection string.
type Scheme string

// Connection-string schemes (the client's SchemeCouchbase, ...).
const (
	Couchbase  Scheme = "couchbase"
	Couchbases Scheme = "couchbases"
	Memcached  Scheme = "memcached"
	Memcacheds Scheme = "memcacheds"
)

// IsMemcached reports whether s connects to plain memcached servers.
func (s Scheme) IsMemcached() bool { return s == Memcached || s == Memcacheds }

// IsTLS reports whether s connects over TLS.
func (s Scheme) IsTLS() bool { return s == Couchbases || s == Memcacheds }

// Default ports per scheme (the client's DefaultKVPort, ...).
const (
	KVPort        = 11210
	KVTLSPort     = 11207
	MemcachedPort = 11211
	HTTPPort      = 8091
	HTTPSPort     = 18091
)

// KVPort is the port of a KV (or memcached) host given without one.
func (s Scheme) KVPort() int {
	switch s {
	case Couchbases:
		return KVTLSPort
	case Memcached, Memcacheds:
		return MemcachedPort
	}
	return KVPort
}

// HTTPPort is the port of an =http host given without one: the cluster
// manager's REST port, over HTTPS with couchbases://.
func (s Scheme) HTTPPort() int {
	if s == Couchbases {
		return HTTPSPort
	}
	return HTTPPort
}

// Error says what is wrong with a connection string, or with one of its
// options (Input is then "name=value").
type Error struct {
	Input  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("kvwire: invalid connection string %q: %s", e.Input, e.Reason)
}

// ConnStr is a parsed connection string; the client's ConnStr documents
// each field.
type ConnStr struct {
	Scheme    Scheme
	Hosts     []string
	HTTPHosts []string
	SRVHost   string
	Bucket    string
	Options   Options
}

// Options are a connection string's query parameters, by name.
type Options map[string]string

// knownOptions are the query parameters Connect understands. Unknown ones
// are an error, so that a typo does not silently fall back to a default.
var knownOptions = map[string]string{
	"kv_timeout":                             "duration > 0: default timeout of a KV operation",
	"connect_timeout":                        "duration > 0: timeout of bootstrapping one connection, and of Connect's redials of the seeds",
	"kv_pool_size":                           "int in 1..256: connections per node",
	"network":                                "auto, default or external: which addresses of the config to use",
	"compression":                            "bool: snappy-compress values the server may receive compressed",
	"compression_min_size":                   "int >= 1: smallest value worth compressing, in bytes",
	"compression_min_ratio":                  "float in (0, 1]: compressed/original ratio at or below which compression is kept",
	"config_poll_interval":                   "duration >= 10ms: how often the cluster config is polled",
	"enable_mutation_tokens":                 "bool: ask for sequence numbers on mutations",
	"tls_verify":                             "peer or none: verify the server certificate (none is insecure); couchbases:// and memcacheds:// only",
	"allow_plain_auth":                       "bool: allow SASL PLAIN, which sends the password in clear, over a connection without TLS",
	"remove_failed_servers":                  "bool: memcached:// only: take a server whose connection attempts keep failing out of the ketama ring until it answers again",
	"server_failure_limit":                   "int >= 1: memcached:// only: consecutive failed connection attempts after which remove_failed_servers takes a server out (default 5)",
	"binary_multiget":                        "bool: memcached:// only: GetMany sends binary quiet gets even where one text multi-get could carry a server's keys",
	"bucket":                                 "string: the bucket, when it is not in the path",
	"nmv_retry_interval":                     "duration >= 0: RFC 0005 fixed wait after NOT_MY_VBUCKET (default or 0: RFC 0049 backoff)",
	"probe_after":                            "duration > 0: how long a request given up after it was sent waits for its answer before the connection probes its node (default 1s)",
	"probe_timeout":                          "duration > 0: how long a connection hears nothing from its node, while a probe or its bootstrap waits, before it closes as unresponsive (default 1s)",
	"health_check":                           "bool: probe a node that leaves requests given up after they were sent unanswered, and watch a bootstrap for silence (default true; false turns both off)",
	"profile":                                "wan_development: defaults for a client far from its cluster (20 s KV and connect timeouts); options given win over it",
	"enable_tracing":                         "bool: the slow-operation report (default true; false turns it off)",
	"tracing_threshold_kv":                   "duration > 0: a KV operation slower than this is in the slow-operation report (default 500ms)",
	"tracing_threshold_queue_flush_interval": "duration >= 10ms: how often the slow-operation report is logged (default 10s)",
	"tracing_threshold_queue_size":           "int in 1..1024: operations per service the slow-operation report shows (default 10)",
	"orphaned_response_logging":              "bool: the orphan report of answers that came after their operation gave up (default true; false turns it off)",
	"tracing_orphaned_queue_flush_interval":  "duration >= 10ms: how often the orphan report is logged (default 10s)",
	"tracing_orphaned_queue_size":            "int in 1..1024: orphans the orphan report shows (default 10)",
	"enable_metrics":                         "bool: the logging meter, the default meter of operation latencies (default true; false turns it off)",
	"metrics_emit_interval":                  "duration >= 10ms: how often the logging meter logs its percentiles (default 10m)",
	"bootstrap_on":                           "both (or libcouchbase's all), cccp or http: where the first config comes from: the KV service (GET_CLUSTER_CONFIG, CCCP), the cluster manager over HTTP, or the KV service first and HTTP where it serves none (default both)",
	"enable_dns_srv":                         "bool: look up the DNS SRV record of a single host given without a port (default true)",
}

// Parse parses a connection string. A string with no scheme is taken
// as couchbase://, but for its untyped hosts, which RFC 0011 reads as
// http://'s (setHosts): "h" and the legacy "h:8091" are KV seeds at 11210
// (no DNS SRV lookup), as gocbcore and libcouchbase read them, and "h:PORT"
// at another port is refused as ambiguous, as gocbcore refuses it. Every
// error names what was wrong.
func Parse(s string) (*ConnStr, error) {
	fail := func(format string, args ...any) (*ConnStr, error) {
		return nil, &Error{Input: redacted(s), Reason: fmt.Sprintf(format, args...)}
	}
	rest := strings.TrimSpace(s)
	if rest == "" {
		return fail("empty")
	}
	cs := &ConnStr{Scheme: Couchbase, Options: Options{}}
	schemeless := true
	if i := strings.Index(rest, "://"); i >= 0 {
		schemeless = false
		cs.Scheme = Scheme(strings.ToLower(rest[:i]))
		rest = rest[i+3:]
	}
	if _, ok := userInfo(rest); ok {
		// Checked first: the host and bucket errors below would quote it.
		return fail("credentials cannot be given in the connection string: set Options.Username and Options.Password")
	}
	// RFC 0011's http:// (kept for older clients' strings, as gocbcore
	// and libcouchbase keep it) is couchbase:// with its hosts read as
	// setHosts says.
	httpScheme := cs.Scheme == "http"
	switch cs.Scheme {
	case Couchbase, Couchbases, Memcached, Memcacheds:
	case "http":
		cs.Scheme = Couchbase
	case "https":
		return fail("https:// is not a connection-string scheme (RFC 0011): use couchbases:// for TLS")
	default:
		return fail("unknown scheme %q (want couchbase, couchbases, memcached, memcacheds or http)", string(cs.Scheme))
	}
	var query string
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	hostPart, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostPart, path = rest[:i], rest[i+1:]
	}
	if reason := cs.setHosts(hostPart, httpScheme, schemeless); reason != "" {
		return fail("%s", reason)
	}
	if path != "" {
		b, err := url.PathUnescape(strings.TrimSuffix(path, "/"))
		if err != nil {
			// A bucket name may hold a '%' (my%bucket), which the
			// path carries percent-encoded.
			return fail("bucket %q: %v (write a '%%' in a bucket name as %%25)", path, err)
		}
		if strings.Contains(b, "/") {
			return fail("bucket %q is not a single path segment", path)
		}
		cs.Bucket = b
	}
	if reason := cs.setOptions(query); reason != "" {
		return fail("%s", reason)
	}
	return cs, nil
}

// secretOptions are the query parameters libcouchbase reads a password
// from: Parse refuses them (as unknown options), and its errors mask their
// values.
var secretOptions = []string{"password", "pass"}

// userInfo returns the "user:password" before the hosts of rest (a
// connection string after its scheme), as gocbcore and libcouchbase accept
// it: everything before the last '@' (no host or bucket has an '@'),
// unless that '@' is in the value of an option the string may carry (a
// known one, or password/pass): then before the last '@' ahead of the
// options, if any. So a password holding a '?' followed by '=' or '&'
// (app:pa?s=s@h) or an '@' and then a '?' (app:p@s?s@h) is userinfo too,
// and its error does not quote it.
func userInfo(rest string) (string, bool) {
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return "", false
	}
	q := strings.IndexByte(rest, '?')
	if q < 0 || at < q || !inOptionValue(rest[q+1:at]) {
		return rest[:at], true
	}
	if at := strings.LastIndexByte(rest[:q], '@'); at >= 0 {
		return rest[:at], true
	}
	return "", false
}

// inOptionValue says whether an '@' after query (the options up to it)
// is in the value of an option Parse knows or masks.
func inOptionValue(query string) bool {
	param := query[strings.LastIndexAny(query, "&;")+1:]
	name, _, ok := strings.Cut(param, "=")
	if !ok {
		return false
	}
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	_, known := knownOptions[name]
	return known || slices.Contains(secretOptions, strings.ToLower(name))
}

// redacted is s, a connection string an error quotes, with the passwords
// it may hold masked: the one of user:password@ and the values of the
// password and pass options. The password is the connection's secret, and
// errors end up in logs.
func redacted(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	if info, ok := userInfo(s[start:]); ok {
		if c := strings.IndexByte(info, ':'); c >= 0 {
			s = s[:start+c+1] + "****" + s[start+len(info):]
		}
	}
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:q+1])
	query := s[q+1:]
	for query != "" {
		// url.ParseQuery's separator is '&'; a ';' makes it fail, and
		// the error quotes the input: split on both.
		end := strings.IndexAny(query, "&;")
		if end < 0 {
			end = len(query)
		}
		param := query[:end]
		name, _, hasValue := strings.Cut(param, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if hasValue && slices.Contains(secretOptions, strings.ToLower(name)) {
			param = param[:strings.IndexByte(param, '=')+1] + "****"
		}
		b.WriteString(param)
		if end < len(query) {
			b.WriteByte(query[end])
			end++
		}
		query = query[end:]
	}
	return b.String()
}

// setOptions sets cs's options from query (a bucket option is the
// bucket), and says what is wrong with them ("": nothing).
func (cs *ConnStr) setOptions(query string) string {
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return fmt.Sprintf("options: %v", err)
		}
		names := make([]string, 0, len(vals))
		for k := range vals {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if _, ok := knownOptions[k]; !ok {
				return fmt.Sprintf("unknown option %q (known: %s)", k, strings.Join(Known(), ", "))
			}
			v := vals[k]
			if v[len(v)-1] == "" {
				// As libcouchbase refuses it: taken as "", a string
				// option (network, profile, bucket) would silently
				// override its Options field with the default.
				return fmt.Sprintf("option %q has no value (give one, or leave the option out)", k)
			}
			cs.Options[k] = v[len(v)-1]
		}
	}
	if b, ok := cs.Options["bucket"]; ok {
		if strings.Contains(b, "/") {
			// As in the path: a bucket is one path segment, and the
			// canonical form (String) writes it in the path.
			return fmt.Sprintf("bucket %q is not a single path segment", b)
		}
		if cs.Bucket != "" && cs.Bucket != b {
			return fmt.Sprintf("bucket given twice: %q in the path and %q as an option", cs.Bucket, b)
		}
		cs.Bucket = b
		delete(cs.Options, "bucket")
	}
	if cs.Scheme.IsMemcached() && cs.Bucket != "" {
		return fmt.Sprintf("%s:// has no buckets (got %q)", cs.Scheme, cs.Bucket)
	}
	if !cs.Scheme.IsMemcached() {
		for _, k := range []string{"remove_failed_servers", "server_failure_limit", "binary_multiget"} {
			if _, ok := cs.Options[k]; ok {
				return fmt.Sprintf("option %q is for memcached:// and memcacheds:// only", k)
			}
		}
	}
	return ""
}

// setHosts sets cs's seeds from the connection string's host list (its
// scheme set), and says what is wrong with them ("": nothing). With
// httpScheme (http://, cs.Scheme couchbase), as RFC 0011 and gocbcore read
// it: a host without a port or at 8091 is a KV seed at 11210 (asked for a
// config over KV first, then over HTTP at its port 8091, as any KV seed
// at the default port is), a host at another port an =http seed; no host
// takes a type, and none is a DNS SRV name. Without a scheme (schemeless),
// RFC 0011's legacy form that gocbcore and libcouchbase read the same way,
// an untyped host at 8091 is such a KV seed at 11210 too, one without a
// port a KV seed at 11210 that is no DNS SRV name (RFC 0011 looks those up
// for couchbase:// and couchbases:// only), and one at another port is
// refused: RFC 0011 reads it as the cluster manager's, most who write
// h:11210 mean a KV port, and gocbcore refuses it ("ambiguous port
// without scheme"). A typed host reads as with couchbase://.
func (cs *ConnStr) setHosts(hostPart string, httpScheme, schemeless bool) string {
	hosts := strings.FieldsFunc(hostPart, func(r rune) bool { return r == ',' || r == ';' })
	for _, h := range hosts {
		h, typ, typed := strings.Cut(h, "=")
		typ = strings.ToLower(typ)
		if httpScheme {
			if typed {
				return fmt.Sprintf("host %q: http:// hosts take no type (=%s): write couchbase://%s=%s", h, typ, strings.TrimSpace(h), typ)
			}
			addr, _, err := parseHost(h, HTTPPort)
			if err != nil {
				return fmt.Sprintf("host %q: %v", h, err)
			}
			host, port, _ := net.SplitHostPort(addr)
			if port == strconv.Itoa(HTTPPort) {
				cs.Hosts = append(cs.Hosts, net.JoinHostPort(host, strconv.Itoa(KVPort)))
			} else {
				cs.HTTPHosts = append(cs.HTTPHosts, addr)
			}
			continue
		}
		isHTTP := false
		switch {
		case typed && cs.Scheme.IsMemcached():
			return fmt.Sprintf("host %q: %s:// hosts take no type (=%s)", h, cs.Scheme, typ)
		// libcouchbase's =mcds and =https name TLS ports: with
		// couchbases:// they are =mcd and =http, TLS following the
		// scheme.
		case !typed || typ == "mcd", typ == "mcds" && cs.Scheme.IsTLS():
		case typ == "http", typ == "https" && cs.Scheme.IsTLS():
			isHTTP = true
		case typ == "https", typ == "mcds":
			return fmt.Sprintf("host %q: =%s needs couchbases:// (TLS follows the scheme; with it, =mcd and =http also mean TLS)", h, typ)
		default:
			return fmt.Sprintf("host %q: unknown type =%s (want =mcd for a KV port or =http for the cluster manager's)", h, typ)
		}
		port := cs.Scheme.KVPort()
		if isHTTP {
			port = cs.Scheme.HTTPPort()
		}
		addr, portGiven, err := parseHost(h, port)
		if err != nil {
			return fmt.Sprintf("host %q: %v", h, err)
		}
		if isHTTP {
			cs.HTTPHosts = append(cs.HTTPHosts, addr)
			continue
		}
		host, p, _ := net.SplitHostPort(addr)
		if schemeless && !typed && p == strconv.Itoa(HTTPPort) {
			cs.Hosts = append(cs.Hosts, net.JoinHostPort(host, strconv.Itoa(KVPort)))
			continue
		}
		if !cs.Scheme.IsMemcached() && !typed && (p == "8091" || p == "18091") {
			return fmt.Sprintf("%s is the cluster manager's HTTP port: write %s=http to bootstrap over HTTP, or give the KV port (11210, or 11207 with TLS)", addr, addr)
		}
		if schemeless && !typed && portGiven {
			// RFC 0011 reads it as http://, whose host at a port
			// other than 8091 is the cluster manager's; most who
			// write h:11210 mean a KV port. gocbcore refuses it too.
			// The scheme goes before every host: one host's
			// string, written as told, would drop the others.
			list := addr
			if len(hosts) > 1 {
				list = strings.TrimSpace(hostPart)
			}
			return fmt.Sprintf("%s: a port without a scheme is ambiguous (RFC 0011 reads it as the cluster manager's, http://):"+
				" write couchbase://%s for a KV port, or http://%s for the cluster manager's", addr, list, list)
		}
		cs.Hosts = append(cs.Hosts, addr)
		// The same trimming as parseHost's (all of unicode.IsSpace, not
		// only ' '): "\v::" is the IPv6 literal "::", not a DNS SRV name.
		// RFC 0011 looks one up for couchbase:// and couchbases:// only,
		// not for a string without a scheme (read as http://).
		if name := strings.TrimSpace(h); len(hosts) == 1 && !typed && !portGiven && !schemeless && !cs.Scheme.IsMemcached() && net.ParseIP(strings.Trim(name, "[]")) == nil {
			cs.SRVHost = name
		}
	}
	if len(cs.Hosts)+len(cs.HTTPHosts) == 0 {
		return "no host"
	}
	return ""
}

// Seeds are the hosts given, as a ConnectError names them: the KV seeds,
// then the =http ones with their type.
func (cs *ConnStr) Seeds() []string {
	out := slices.Clone(cs.Hosts)
	for _, h := range cs.HTTPHosts {
		out = append(out, h+"=http")
	}
	return out
}

// Known lists the option names Parse accepts.
func Known() []string {
	out := make([]string, 0, len(knownOptions))
	for k := range knownOptions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parseHost returns h as "host:port", with defPort when h has no port
// (portGiven false).
func parseHost(h string, defPort int) (addr string, portGiven bool, err error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", false, errors.New("empty host")
	}
	host, port := h, ""
	switch {
	case strings.HasPrefix(h, "["):
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", false, errors.New("IPv6 literal without closing ']'")
		}
		host = h[1:end]
		after := h[end+1:]
		if after != "" {
			if !strings.HasPrefix(after, ":") {
				return "", false, fmt.Errorf("unexpected %q after the IPv6 literal", after)
			}
			port = after[1:]
			if port == "" {
				return "", false, errors.New("empty port after ':' (give one, or no ':')")
			}
		}
		if net.ParseIP(host) == nil {
			return "", false, fmt.Errorf("%q is not an IPv6 address", host)
		}
	case strings.Count(h, ":") > 1:
		// A bare IPv6 literal without a port.
		if net.ParseIP(h) == nil {
			return "", false, errors.New("several ':' but not an IPv6 address (put IPv6 literals in brackets)")
		}
		host = h
	case strings.Contains(h, ":"):
		i := strings.IndexByte(h, ':')
		host, port = h[:i], h[i+1:]
		if port == "" {
			return "", false, errors.New("empty port after ':' (give one, or no ':')")
		}
	}
	if host == "" {
		return "", false, errors.New("empty host name")
	}
	if strings.ContainsAny(host, " /?#@") {
		return "", false, errors.New("host name contains a character hosts cannot have")
	}
	p := defPort
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", false, fmt.Errorf("port %q is not in 1..65535", port)
		}
		p = n
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), port != "", nil
}

// Duration reads a duration option: a Go duration ("2.5s", "2500ms") or a
// whole number of milliseconds, as Couchbase SDKs accept. ok is false when the
// option is absent.
func (o Options) Duration(name string) (d time.Duration, ok bool, err error) {
	v, ok := o[name]
	if !ok {
		return 0, false, nil
	}
	fail := func(reason string) (time.Duration, bool, error) {
		return 0, true, &Error{Input: name + "=" + v, Reason: reason}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// A whole number of milliseconds; time.Duration holds up to
		// about 292 years of nanoseconds.
		if err != nil || n > math.MaxInt64/int64(time.Millisecond) || n < math.MinInt64/int64(time.Millisecond) {
			return fail("too large for a duration (at most " + strconv.FormatInt(math.MaxInt64/int64(time.Millisecond), 10) + " ms)")
		}
		d = time.Duration(n) * time.Millisecond
	} else if d, err = time.ParseDuration(v); err != nil {
		if strings.Contains(err.Error(), "invalid duration") && isDurationShaped(v) {
			return fail("too large for a duration (at most about 292 years)")
		}
		return fail("not a duration (use e.g. 2500ms or 2500)")
	}
	if d < 0 {
		return fail("negative duration")
	}
	return d, true, nil
}

// isDurationShaped reports whether v is written as time.ParseDuration
// expects ([+-] then number-unit pairs with known units), so that a parse
// failure can only be an overflow.
func isDurationShaped(v string) bool {
	v = strings.TrimLeft(v, "+-")
	if v == "" {
		return false
	}
	for v != "" {
		digits := 0
		i := 0
		for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
			if v[i] != '.' {
				digits++
			}
			i++
		}
		if digits == 0 || strings.Count(v[:i], ".") > 1 {
			return false
		}
		v = v[i:]
		unit := ""
		for _, u := range []string{"ns", "us", "µs", "μs", "ms", "s", "m", "h"} {
			if strings.HasPrefix(v, u) && len(u) > len(unit) {
				unit = u
			}
		}
		if unit == "" {
			return false
		}
		v = v[len(unit):]
	}
	return true
}

// Int reads an integer option.
func (o Options) Int(name string) (n int, ok bool, err error) {
	v, ok := o[name]
	if !ok {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, true, &Error{Input: name + "=" + v, Reason: "not a non-negative integer"}
	}
	return n, true, nil
}

// Float reads a floating-point option.
func (o Options) Float(name string) (f float64, ok bool, err error) {
	v, ok := o[name]
	if !ok {
		return 0, false, nil
	}
	f, err = strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, &Error{Input: name + "=" + v, Reason: "not a finite non-negative number"}
	}
	return f, true, nil
}

// Bool reads a boolean option (true/false/1/0/yes/no/on/off).
func (o Options) Bool(name string) (b, ok bool, err error) {
	v, ok := o[name]
	if !ok {
		return false, false, nil
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true, true, nil
	case "false", "0", "no", "off":
		return false, true, nil
	}
	return false, true, &Error{Input: name + "=" + v, Reason: "not a boolean"}
}

// String rebuilds the connection string in canonical form.
func (cs *ConnStr) String() string {
	var b strings.Builder
	b.WriteString(string(cs.Scheme))
	b.WriteString("://")
	hosts := cs.Hosts
	if cs.SRVHost != "" && len(hosts) == 1 && len(cs.HTTPHosts) == 0 && !cs.Scheme.IsMemcached() &&
		hosts[0] == net.JoinHostPort(cs.SRVHost, strconv.Itoa(cs.Scheme.KVPort())) {
		// Without its port, a DNS SRV name still; only while the host
		// is that name at the scheme's port (the fields may have been
		// changed since Parse).
		hosts = []string{cs.SRVHost}
	}
	for _, h := range cs.HTTPHosts {
		hosts = append(slices.Clip(hosts), h+"=http")
	}
	b.WriteString(strings.Join(hosts, ","))
	if cs.Bucket != "" {
		b.WriteByte('/')
		// '@' escaped too (PathEscape keeps it): Parse reads an '@'
		// before the options as credentials.
		b.WriteString(strings.ReplaceAll(url.PathEscape(cs.Bucket), "@", "%40"))
	}
	if len(cs.Options) > 0 {
		v := url.Values{}
		for k, o := range cs.Options {
			v.Set(k, o)
		}
		b.WriteByte('?')
		b.WriteString(v.Encode())
	}
	return b.String()
}
