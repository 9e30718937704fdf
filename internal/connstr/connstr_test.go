package connstr

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		scheme  Scheme
		hosts   []string
		bucket  string
		options Options
	}{
		{"couchbase://h1", Couchbase, []string{"h1:11210"}, "", Options{}},
		{"h1", Couchbase, []string{"h1:11210"}, "", Options{}},
		{"couchbases://h1,h2:12000", Couchbases, []string{"h1:11207", "h2:12000"}, "", Options{}},
		{"COUCHBASE://h1;h2/travel-sample", Couchbase, []string{"h1:11210", "h2:11210"}, "travel-sample", Options{}},
		{"memcached://m1:11211,m2", Memcached, []string{"m1:11211", "m2:11211"}, "", Options{}},
		{"memcacheds://m1,m2:11300?remove_failed_servers=true&server_failure_limit=2", Memcacheds,
			[]string{"m1:11211", "m2:11300"}, "", Options{"remove_failed_servers": "true", "server_failure_limit": "2"}},
		{"couchbase://[::1]:9000,[fe80::1]", Couchbase, []string{"[::1]:9000", "[fe80::1]:11210"}, "", Options{}},
		{"couchbase://::1", Couchbase, []string{"[::1]:11210"}, "", Options{}},
		{"couchbase://h/b%20x/", Couchbase, []string{"h:11210"}, "b x", Options{}},
		{"couchbase://h?kv_timeout=100ms&network=external&kv_timeout=200", Couchbase, []string{"h:11210"}, "",
			Options{"kv_timeout": "200", "network": "external"}},
		{"couchbase://h?bucket=default", Couchbase, []string{"h:11210"}, "default", Options{}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			cs, err := Parse(c.in)
			require.NoError(t, err)
			assert.Equal(t, c.scheme, cs.Scheme)
			assert.Equal(t, c.hosts, cs.Hosts)
			assert.Equal(t, c.bucket, cs.Bucket)
			assert.Equal(t, c.options, cs.Options)
			again, err := Parse(cs.String())
			require.NoError(t, err, "canonical form %q must parse", cs.String())
			assert.Equal(t, cs, again)
		})
	}
}

// RFC 0011's host types, and which strings name a DNS SRV record.
func TestParseSeedTypesAndSRV(t *testing.T) {
	cases := []struct {
		in        string
		hosts     []string
		httpHosts []string
		srvHost   string
		canonical string
	}{
		{"couchbase://cb.example.com/b", []string{"cb.example.com:11210"}, nil, "cb.example.com", "couchbase://cb.example.com/b"},
		{"couchbases://cb.example.cloud", []string{"cb.example.cloud:11207"}, nil, "cb.example.cloud", "couchbases://cb.example.cloud"},
		// A port, a second host, a type or an IP address: no SRV lookup.
		{"couchbase://cb.example.com:11210", []string{"cb.example.com:11210"}, nil, "", ""},
		{"couchbase://a.example.com,b.example.com", []string{"a.example.com:11210", "b.example.com:11210"}, nil, "", ""},
		{"couchbase://cb.example.com=mcd", []string{"cb.example.com:11210"}, nil, "", "couchbase://cb.example.com:11210"},
		{"couchbase://10.0.0.1", []string{"10.0.0.1:11210"}, nil, "", ""},
		{"couchbase://[::1]", []string{"[::1]:11210"}, nil, "", ""},
		{"memcached://cache.example.com", []string{"cache.example.com:11211"}, nil, "", ""},
		// The cluster manager's ports.
		{"couchbase://h1:9000=http,h2=HTTP/b", nil, []string{"h1:9000", "h2:8091"}, "", "couchbase://h1:9000=http,h2:8091=http/b"},
		{"couchbases://h1=http,h2:19000=https", nil, []string{"h1:18091", "h2:19000"}, "", "couchbases://h1:18091=http,h2:19000=http"},
		{"couchbase://h:12000=mcd,h:9000=http", []string{"h:12000"}, []string{"h:9000"}, "", "couchbase://h:12000,h:9000=http"},
		{"couchbase://h:8091=http", nil, []string{"h:8091"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			cs, err := Parse(c.in)
			require.NoError(t, err)
			assert.Equal(t, c.hosts, cs.Hosts)
			assert.Equal(t, c.httpHosts, cs.HTTPHosts)
			assert.Equal(t, c.srvHost, cs.SRVHost)
			if c.canonical != "" {
				assert.Equal(t, c.canonical, cs.String())
			}
			again, err := Parse(cs.String())
			require.NoError(t, err, "canonical form %q must parse", cs.String())
			assert.Equal(t, cs, again)
		})
	}
}

func TestTypedOptions(t *testing.T) {
	cs, err := Parse("couchbase://h?kv_timeout=2500&connect_timeout=1.5s&kv_pool_size=4&compression=off&compression_min_ratio=0.83")
	require.NoError(t, err)
	d, ok, err := cs.Options.Duration("kv_timeout")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 2500*time.Millisecond, d)
	d, _, err = cs.Options.Duration("connect_timeout")
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, d)
	n, _, err := cs.Options.Int("kv_pool_size")
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	b, ok, err := cs.Options.Bool("compression")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.False(t, b)
	f, _, err := cs.Options.Float("compression_min_ratio")
	require.NoError(t, err)
	assert.InDelta(t, 0.83, f, 1e-9)
	_, ok, err = cs.Options.Duration("config_poll_interval")
	assert.False(t, ok)
	assert.NoError(t, err)

	bad, err := Parse("couchbase://h?kv_timeout=soon&kv_pool_size=-1&compression=maybe")
	require.NoError(t, err)
	_, _, err = bad.Options.Duration("kv_timeout")
	assert.IsType(t, &Error{}, err)
	_, _, err = bad.Options.Int("kv_pool_size")
	assert.IsType(t, &Error{}, err)
	_, _, err = bad.Options.Bool("compression")
	assert.IsType(t, &Error{}, err)
}

// FuzzParse: never panics; whatever parses has a canonical form that
// parses to the same thing.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"couchbase://h1,h2:11210/bucket?kv_timeout=2500ms&network=external",
		"couchbases://[::1]:11207", "memcached://a,b:1", "h", "couchbase://h/%41", "couchbase://h?bucket=x",
		"couchbase://h:9000=http,h2=mcd/b?bootstrap_on=http", "couchbases://cb.example.cloud?enable_dns_srv=false",
		"http://h1:9000,h2:8091,h3/b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := Parse(s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		if len(cs.Hosts)+len(cs.HTTPHosts) == 0 {
			t.Fatalf("parsed %q with no hosts", s)
		}
		again, err := Parse(cs.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", cs.String(), s, err)
		}
		if again.String() != cs.String() {
			t.Fatalf("canonical form not stable: %q -> %q", cs.String(), again.String())
		}
	})
}

// A host written with a ':' and no port after it is malformed: it is
// neither given the scheme's port silently nor taken for a DNS SRV name
// (whose record name would then end in ':'), and the error says so.
func TestParseRejectsAnEmptyPort(t *testing.T) {
	for _, s := range []string{"couchbase://cb.example.com:", "couchbase://[::1]:", "couchbase://h1:,h2", "couchbase://h:=http"} {
		t.Run(s, func(t *testing.T) {
			cs, err := Parse(s)
			if !assert.Error(t, err, "parsed as %+v", cs) {
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Contains(t, e.Reason, "port")
		})
	}
}

// A bucket given as an option is held to the path's rule (one path
// segment), so that every string that parses has a canonical form that
// parses to the same thing (FuzzParse's contract).
func TestParseBucketOptionIsOneSegment(t *testing.T) {
	cs, err := Parse("couchbase://h?bucket=a%2Fb")
	if err == nil {
		_, again := Parse(cs.String())
		t.Fatalf("bucket %q accepted as an option; its canonical form %q parses with %v", cs.Bucket, cs.String(), again)
	}
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Contains(t, e.Reason, "bucket")
}

// An IP literal set off by whitespace other than ' ' is still an IP
// literal, not a DNS SRV name (found by FuzzParse: ",\v::" had SRVHost
// "::" and the canonical form "couchbase://::", which reparsed as
// "couchbase://[::]:11210").
func TestParseIPLiteralWithWhitespaceIsNoSRVName(t *testing.T) {
	for _, s := range []string{",\v::", "couchbase://\t127.0.0.1", "couchbase://\n[::1]\t", "couchbases://\v10.0.0.1"} {
		cs, err := Parse(s)
		require.NoError(t, err, "%q", s)
		assert.Empty(t, cs.SRVHost, "%q", s)
		again, err := Parse(cs.String())
		require.NoError(t, err, "%q", cs.String())
		assert.Equal(t, cs.String(), again.String(), "%q", s)
	}
	cs, err := Parse("couchbase://\tcb.example.com\v")
	require.NoError(t, err)
	assert.Equal(t, "cb.example.com", cs.SRVHost)
}

// A bucket path that is not valid percent-encoding says so: Couchbase
// bucket names may hold a '%' (my%bucket), which the path must carry as
// %25. The error used to say the bucket was not a single path segment,
// which it is.
func TestParseBucketBadEscapeSaysSo(t *testing.T) {
	for _, s := range []string{"couchbase://h/my%bucket", "couchbase://h/b%2", "couchbases://h/%zz/"} {
		_, err := Parse(s)
		var e *Error
		require.ErrorAs(t, err, &e, "%q", s)
		assert.NotContains(t, e.Reason, "single path segment", "%q", s)
		assert.Contains(t, e.Reason, "invalid URL escape", "%q", s)
		assert.Contains(t, e.Reason, "%25", "%q: says how to write a '%%'", s)
	}
	cs, err := Parse("couchbase://h/my%25bucket")
	require.NoError(t, err)
	assert.Equal(t, "my%bucket", cs.Bucket)
	assert.Equal(t, "couchbase://h/my%25bucket", cs.String())
}

// libcouchbase's TLS host types: =mcds names a KV TLS port as =https names
// a REST TLS port. With couchbases:// they are =mcd and =http (TLS
// follows the scheme); with couchbase:// they are refused, saying so.
func TestParseTLSHostTypes(t *testing.T) {
	cs, err := Parse("couchbases://h1:11207=mcds,h2=MCDS,h3:18091=https/b")
	require.NoError(t, err)
	assert.Equal(t, []string{"h1:11207", "h2:11207"}, cs.Hosts)
	assert.Equal(t, []string{"h3:18091"}, cs.HTTPHosts)
	assert.Empty(t, cs.SRVHost)
	assert.Equal(t, "couchbases://h1:11207,h2:11207,h3:18091=http/b", cs.String())

	_, err = Parse("couchbase://h:11207=mcds")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Contains(t, e.Reason, "=mcds needs couchbases://")
}

// RFC 0011's http:// scheme, which clients must accept for backwards
// compatibility (gocbcore does): a host without a port, or at the cluster
// manager's default port 8091, is asked for a config over the KV service
// at 11210 first and over HTTP at 8091 (a KV seed at 11210 is, the
// canonical form being couchbase://host:11210); a host at another port is
// a cluster manager REST port, asked over HTTP at once (host:port=http).
// No DNS SRV lookup (RFC 0011: couchbase and couchbases only). It used to
// be refused as an unknown scheme.
func TestParseHTTPScheme(t *testing.T) {
	cases := []struct {
		in        string
		hosts     []string
		httpHosts []string
		canonical string
	}{
		{"http://cb.example.com", []string{"cb.example.com:11210"}, nil, "couchbase://cb.example.com:11210"},
		{"HTTP://h:8091/b?kv_timeout=2s", []string{"h:11210"}, nil, "couchbase://h:11210/b?kv_timeout=2s"},
		{"http://h1:9000,h2;[::1]:8091", []string{"h2:11210", "[::1]:11210"}, []string{"h1:9000"}, "couchbase://h2:11210,[::1]:11210,h1:9000=http"},
		{"http://10.0.0.1:18091", nil, []string{"10.0.0.1:18091"}, "couchbase://10.0.0.1:18091=http"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			cs, err := Parse(c.in)
			require.NoError(t, err)
			assert.Equal(t, Couchbase, cs.Scheme)
			assert.Equal(t, c.hosts, cs.Hosts)
			assert.Equal(t, c.httpHosts, cs.HTTPHosts)
			assert.Empty(t, cs.SRVHost, "no DNS SRV lookup for http://")
			assert.Equal(t, c.canonical, cs.String())
			again, err := Parse(cs.String())
			require.NoError(t, err)
			assert.Equal(t, cs, again)
		})
	}
	for in, want := range map[string]string{
		"http://h:11210=mcd": "http:// hosts take no type",
		"http://h=http":      "http:// hosts take no type",
		"https://h":          "use couchbases://",
		"ftp://h":            "http",
	} {
		_, err := Parse(in)
		var e *Error
		require.ErrorAs(t, err, &e, "%q", in)
		assert.Contains(t, e.Reason, want, "%q", in)
	}
}

// A connection string without a scheme whose host is at the cluster
// manager's default port 8091 ("h:8091") is RFC 0011's legacy form, read by
// gocbcore and libcouchbase as a KV seed at 11210 whose cluster manager is
// at 8091, as kvwire reads http://h:8091. It was refused ("8091 is the
// cluster manager's HTTP port"). Every other schemeless form reads as
// before: couchbase:// (a KV port, a DNS SRV name), and 18091 or
// couchbase://h:8091 are still refused.
// A schemeless host at a port other than 8091 has no one reading: RFC
// 0011 takes a string without a scheme as http://, whose host at another
// port is the cluster manager's (h:9000, cluster_run's), while most who
// write "h:11210" mean a KV port, which kvwire took it for. gocbcore
// refuses it ("ambiguous port without scheme"); so does kvwire, saying
// what to write for each reading.
func TestParseSchemelessPortIsAmbiguous(t *testing.T) {
	for _, in := range []string{"h:11210", "h:9000", "localhost:12000/default", "h1:8091,h2:11210"} {
		_, err := Parse(in)
		var e *Error
		require.ErrorAs(t, err, &e, "%q", in)
		assert.Contains(t, e.Reason, "without a scheme", "%q", in)
		assert.Contains(t, e.Reason, "couchbase://", "%q: says what to write for a KV port", in)
		assert.Contains(t, e.Reason, "http://", "%q: says what to write for the cluster manager's", in)
	}
	// A typed host says which port it is.
	cs, err := Parse("h:9000=http,h:12000=mcd")
	require.NoError(t, err)
	assert.Equal(t, []string{"h:12000"}, cs.Hosts)
	assert.Equal(t, []string{"h:9000"}, cs.HTTPHosts)
}

func TestParseSchemelessAt8091(t *testing.T) {
	cases := []struct {
		in        string
		hosts     []string
		canonical string
	}{
		{"h:8091", []string{"h:11210"}, "couchbase://h:11210"},
		{"h1:8091,[::1]:8091/b", []string{"h1:11210", "[::1]:11210"}, "couchbase://h1:11210,[::1]:11210/b"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			cs, err := Parse(c.in)
			require.NoError(t, err)
			assert.Equal(t, Couchbase, cs.Scheme)
			assert.Equal(t, c.hosts, cs.Hosts)
			assert.Empty(t, cs.HTTPHosts)
			assert.Empty(t, cs.SRVHost, "a port was given: no DNS SRV name")
			assert.Equal(t, c.canonical, cs.String())
		})
	}
	// A host without a port is a KV seed at 11210 (then the cluster
	// manager at 8091), as http://h is: RFC 0011 looks up a DNS SRV
	// record only for couchbase:// and couchbases://.
	cs, err := Parse("h")
	require.NoError(t, err)
	assert.Equal(t, []string{"h:11210"}, cs.Hosts)
	assert.Empty(t, cs.SRVHost, "no scheme is http://, which has no DNS SRV lookup")
	cs, err = Parse("h=mcd")
	require.NoError(t, err, "a typed host says what its port is")
	assert.Equal(t, []string{"h:11210"}, cs.Hosts)
	for _, in := range []string{"h:18091", "couchbase://h:8091", "h1:8091,h2:18091"} {
		_, err := Parse(in)
		var e *Error
		require.ErrorAs(t, err, &e, "%q", in)
		assert.Contains(t, e.Reason, "cluster manager's HTTP port", "%q", in)
	}
}

// The error of a schemeless host list with a port says what to write for
// the whole list: "write couchbase://h2:11210" of "h1:11210,h2:11210",
// done as told, would drop h1.
func TestParseSchemelessPortErrorKeepsEveryHost(t *testing.T) {
	_, err := Parse("h1:11210,h2:11210/b")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Contains(t, e.Reason, "couchbase://h1:11210,h2:11210 for", e.Reason)
	assert.Contains(t, e.Reason, "http://h1:11210,h2:11210 for", e.Reason)
}
