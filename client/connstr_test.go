package client

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/connstr"
)

// TestParseConnStrFields: ParseConnStr gives every field internal/connstr
// parsed (whose tests cover the grammar), and String and the typed readers
// read the public struct, changes included.
func TestParseConnStrFields(t *testing.T) {
	cs, err := ParseConnStr("couchbases://h:12000=mcd,h2:19000=http/b%20x?kv_timeout=1500")
	require.NoError(t, err)
	assert.Equal(t, &ConnStr{Scheme: SchemeCouchbases, Hosts: []string{"h:12000"}, HTTPHosts: []string{"h2:19000"},
		Bucket: "b x", Options: map[string]string{"kv_timeout": "1500"}}, cs)
	assert.Equal(t, "couchbases://h:12000,h2:19000=http/b%20x?kv_timeout=1500", cs.String())
	srv, err := ParseConnStr("couchbase://cb.example.com")
	require.NoError(t, err)
	assert.Equal(t, "cb.example.com", srv.SRVHost)
	assert.Equal(t, []string{"h:12000", "h2:19000=http"}, cs.seeds())

	cs.Scheme, cs.Bucket, cs.Options["kv_timeout"] = SchemeMemcached, "", "2s"
	assert.Equal(t, "memcached://h:12000,h2:19000=http?kv_timeout=2s", cs.String())
	d, ok, err := cs.Duration("kv_timeout")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 2*time.Second, d)
	assert.Equal(t, []string{"allow_plain_auth", "binary_multiget"}, KnownConnStrOptions()[:2])
}

// TestConnStrConstants: the schemes and default ports internal/connstr
// parses with are the ones client documents.
func TestConnStrConstants(t *testing.T) {
	for s, want := range map[Scheme]connstr.Scheme{SchemeCouchbase: connstr.Couchbase, SchemeCouchbases: connstr.Couchbases,
		SchemeMemcached: connstr.Memcached, SchemeMemcacheds: connstr.Memcacheds} {
		assert.Equal(t, string(want), string(s))
	}
	assert.Equal(t, []int{connstr.KVPort, connstr.KVTLSPort, connstr.MemcachedPort, connstr.HTTPPort, connstr.HTTPSPort},
		[]int{DefaultKVPort, DefaultKVTLSPort, DefaultMemcachedPort, DefaultHTTPPort, DefaultHTTPSPort})
}

func TestParseConnStrErrors(t *testing.T) {
	cases := map[string]string{
		"":                                      "empty",
		"ftp://h":                               "unknown scheme",
		"https://h":                             "use couchbases://",
		"couchbase://":                          "no host",
		"couchbase:///b":                        "no host",
		"couchbase://h:0":                       "not in 1..65535",
		"couchbase://h:70000":                   "not in 1..65535",
		"couchbase://h:x":                       "not in 1..65535",
		"couchbase://[::1":                      "closing ']'",
		"couchbase://[zz]:1":                    "not an IPv6 address",
		"couchbase://a:b:c":                     "IPv6 literals in brackets",
		"couchbase://h?kv_timout=1":             `unknown option "kv_timout"`,
		"couchbase://h/a/b":                     "single path segment",
		"couchbase://h/a?bucket=b":              "bucket given twice",
		"memcached://h/b":                       "memcached:// has no buckets",
		"memcacheds://h/b":                      "memcacheds:// has no buckets",
		"couchbase://h?remove_failed_servers=1": "for memcached:// and memcacheds:// only",
		"couchbase://h:8091":                    "write h:8091=http to bootstrap over HTTP",
		"couchbase://h:18091":                   "cluster manager's HTTP port",
		"couchbase://h=https":                   "=https needs couchbases://",
		"couchbase://h=dcp":                     "unknown type =dcp",
		"memcached://h=mcd":                     "memcached:// hosts take no type",
		"couchbase://h:x=http":                  "not in 1..65535",
		"couchbase://h?kv_timeout=%zz":          "options",
		"couchbase://,;,":                       "no host", // separators only
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			_, err := ParseConnStr(in)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidConnStr))
			assert.True(t, errors.Is(err, ErrInvalidArgument))
			assert.Contains(t, err.Error(), want)
		})
	}
}

// TestConnStrTypedOptionErrors: ConnStr's typed readers fail with a
// *ConnStrError matching ErrInvalidConnStr.
func TestConnStrTypedOptionErrors(t *testing.T) {
	bad, err := ParseConnStr("couchbase://h?kv_timeout=soon&kv_pool_size=-1&compression=maybe")
	require.NoError(t, err)
	_, _, err = bad.Duration("kv_timeout")
	assert.ErrorIs(t, err, ErrInvalidConnStr)
	_, _, err = bad.Int("kv_pool_size")
	assert.ErrorIs(t, err, ErrInvalidConnStr)
	_, _, err = bad.Bool("compression")
	assert.ErrorIs(t, err, ErrInvalidConnStr)
	var cse *ConnStrError
	assert.ErrorAs(t, err, &cse)
}

// TestConnStrNumbersOutOfRange: every numeric option out of its range is
// refused by Connect with a *ConnStrError naming the option and the value,
// before any dial; none is silently replaced by a default or overflowed.
func TestConnStrNumbersOutOfRange(t *testing.T) {
	cases := map[string]string{
		"kv_timeout=18446744073710":            "too large",     // ms: overflowed to 448µs before
		"kv_timeout=99999999999999999999":      "too large",     // beyond int64
		"kv_timeout=9999999999h":               "too large",     // Go syntax, beyond 292 years
		"connect_timeout=9223372036855":        "too large",     // MaxInt64/1e6 + 1 ms
		"kv_timeout=-5":                        "negative",      //
		"kv_timeout=0":                         "positive",      // 0 would mean the default
		"connect_timeout=0s":                   "positive",      //
		"config_poll_interval=1ns":             "at least 10ms", // a busy loop
		"nmv_retry_interval=-1ms":              "negative",      //
		"probe_after=0":                        "positive",      // 0 would mean the default
		"probe_after=-1s":                      "negative",      //
		"probe_timeout=0ms":                    "positive",      //
		"probe_timeout=later":                  "not a duration",
		"kv_pool_size=0":                       "1..256",       //
		"kv_pool_size=-1":                      "non-negative", //
		"kv_pool_size=100000":                  "1..256",       //
		"kv_pool_size=99999999999999999999999": "non-negative", // beyond int
		"compression_min_size=0":               "at least 1",   //
		"compression_min_ratio=NaN":            "finite",       //
		"compression_min_ratio=Inf":            "finite",       //
		"compression_min_ratio=1e400":          "finite",       //
		"compression_min_ratio=5":              "(0, 1]",       //
		"compression_min_ratio=0":              "(0, 1]",       //
		"compression_min_ratio=-0.5":           "non-negative", //
		"kv_timeout=soon":                      "not a duration",
		"kv_timeout=1.5.5s":                    "not a duration",
	}
	addr, dialed := silentListener(t)
	for opt, want := range cases {
		t.Run(opt, func(t *testing.T) {
			before := dialed(t)
			c, err := Connect(context.Background(), "couchbase://"+addr+"/default?"+opt, &Options{ConnectTimeout: 20 * time.Second})
			if c != nil {
				_ = c.Close()
			}
			require.Error(t, err)
			var cse *ConnStrError
			require.True(t, errors.As(err, &cse), "%v is a *ConnStrError", err)
			assert.Equal(t, opt, cse.Input, "the error names the option and its value")
			assert.Contains(t, err.Error(), want)
			assert.ErrorIs(t, err, ErrInvalidConnStr)
			assert.Equal(t, before, dialed(t), "refused before dialing")
		})
	}
}

// TestConnStrNumbersInRange: the edges of each range are accepted and used.
func TestConnStrNumbersInRange(t *testing.T) {
	cs, err := ParseConnStr("couchbase://h/b?kv_timeout=9223372036854&config_poll_interval=10ms&nmv_retry_interval=0" +
		"&kv_pool_size=256&compression_min_size=1&compression_min_ratio=1&connect_timeout=2562047h" +
		"&probe_after=1ns&probe_timeout=1ms")
	require.NoError(t, err)
	o, err := Options{}.resolved(cs)
	require.NoError(t, err)
	assert.Equal(t, 9223372036854*time.Millisecond, o.KVTimeout)
	assert.Equal(t, 2562047*time.Hour, o.ConnectTimeout)
	assert.Equal(t, 10*time.Millisecond, o.ConfigPollInterval)
	assert.Equal(t, time.Duration(0), o.NMVRetryInterval)
	assert.Equal(t, 256, o.ConnectionsPerNode)
	assert.Equal(t, 1, o.Compression.MinSize)
	assert.Equal(t, 1.0, o.Compression.MinRatio)
	assert.Equal(t, HealthCheckOptions{ProbeAfter: time.Nanosecond, ProbeTimeout: time.Millisecond}, o.HealthCheck)
}

// TestHealthCheckOptions: probe_after and probe_timeout (or
// Options.HealthCheck) are what every connection of the client is dialed
// with; the connection string wins over Options; zero means the defaults.
func TestHealthCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		connStr string
		opts    HealthCheckOptions
		want    HealthCheckOptions
	}{
		{"couchbase://h/b", HealthCheckOptions{}, HealthCheckOptions{ProbeAfter: DefaultProbeAfter, ProbeTimeout: DefaultProbeTimeout}},
		{"couchbase://h/b", HealthCheckOptions{ProbeTimeout: 30 * time.Second}, HealthCheckOptions{ProbeAfter: DefaultProbeAfter, ProbeTimeout: 30 * time.Second}},
		{"couchbase://h/b?probe_after=200ms&probe_timeout=5s", HealthCheckOptions{ProbeAfter: time.Minute}, HealthCheckOptions{ProbeAfter: 200 * time.Millisecond, ProbeTimeout: 5 * time.Second}},
		{"memcached://h?probe_timeout=1500", HealthCheckOptions{}, HealthCheckOptions{ProbeAfter: DefaultProbeAfter, ProbeTimeout: 1500 * time.Millisecond}},
	} {
		cs, err := ParseConnStr(tc.connStr)
		require.NoError(t, err, tc.connStr)
		o, err := Options{HealthCheck: tc.opts}.resolved(cs)
		require.NoError(t, err, tc.connStr)
		assert.Equal(t, tc.want, o.HealthCheck, "%s with %+v", tc.connStr, tc.opts)
		c := &Client{opts: o, memcached: cs.Scheme.IsMemcached(), obs: &observers{}}
		for _, co := range []conn.Options{c.connOptions()} {
			assert.Equal(t, tc.want.ProbeAfter, co.ProbeAfter, tc.connStr)
			assert.Equal(t, tc.want.ProbeTimeout, co.ProbeTimeout, tc.connStr)
		}
	}
}

// TestOptionsNumbersOutOfRange: Options fields out of range are refused
// with ErrInvalidArgument naming the field; zero still means the default.
func TestOptionsNumbersOutOfRange(t *testing.T) {
	cs, err := ParseConnStr("couchbase://h/b")
	require.NoError(t, err)
	for field, o := range map[string]Options{
		"KVTimeout":                {KVTimeout: -time.Second},
		"ConnectTimeout":           {ConnectTimeout: -1},
		"NMVRetryInterval":         {NMVRetryInterval: -1},
		"ConfigPollInterval":       {ConfigPollInterval: time.Microsecond},
		"ConnectionsPerNode":       {ConnectionsPerNode: -1},
		"Compression.MinSize":      {Compression: CompressionOptions{MinSize: -1}},
		"Compression.MinRatio":     {Compression: CompressionOptions{MinRatio: 5}},
		"MaxPendingPerConnection":  {MaxPendingPerConnection: -1},
		"HealthCheck.ProbeAfter":   {HealthCheck: HealthCheckOptions{ProbeAfter: -time.Second}},
		"HealthCheck.ProbeTimeout": {HealthCheck: HealthCheckOptions{ProbeTimeout: -1}},
	} {
		_, err := o.resolved(cs)
		assert.ErrorIs(t, err, ErrInvalidArgument, field)
		assert.ErrorContains(t, err, "Options."+field, field)
	}
	_, err = Options{ConnectionsPerNode: 257}.resolved(cs)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Options{Compression: CompressionOptions{MinRatio: math.NaN()}}.resolved(cs)
	assert.ErrorIs(t, err, ErrInvalidArgument)

	o, err := Options{}.resolved(cs)
	require.NoError(t, err)
	assert.Equal(t, DefaultKVTimeout, o.KVTimeout)
	assert.Equal(t, 1, o.ConnectionsPerNode)
	assert.Equal(t, DefaultCompressionMinRatio, o.Compression.MinRatio)
}

// TestBootstrapOnAndDNSSRVOptions: bootstrap_on and enable_dns_srv fill
// Options.BootstrapOn and DisableDNSSRV, the connection string winning;
// settings that could not bootstrap, or would leave hosts unused, are
// refused before anything is dialed.
func TestBootstrapOnAndDNSSRVOptions(t *testing.T) {
	for _, tc := range []struct {
		connStr string
		opts    Options
		on      BootstrapOn
		noSRV   bool
	}{
		{"couchbase://h/b", Options{}, BootstrapOnBoth, false},
		{"couchbase://h/b?bootstrap_on=HTTP", Options{BootstrapOn: BootstrapOnCCCP}, BootstrapOnHTTP, false},
		{"couchbase://h/b", Options{BootstrapOn: BootstrapOnCCCP, DisableDNSSRV: true}, BootstrapOnCCCP, true},
		{"couchbase://h/b?enable_dns_srv=false", Options{}, BootstrapOnBoth, true},
		{"couchbase://h/b?enable_dns_srv=true", Options{DisableDNSSRV: true}, BootstrapOnBoth, false},
		{"couchbase://h:9000=http/b?bootstrap_on=both", Options{}, BootstrapOnBoth, false},
	} {
		cs, err := ParseConnStr(tc.connStr)
		require.NoError(t, err, tc.connStr)
		o, err := tc.opts.resolved(cs)
		require.NoError(t, err, tc.connStr)
		assert.Equal(t, tc.on, o.BootstrapOn, tc.connStr)
		assert.Equal(t, tc.noSRV, o.DisableDNSSRV, tc.connStr)
	}
	for connStr, want := range map[string]string{
		"couchbase://h/b?bootstrap_on=dcp":               "want both, cccp or http",
		"couchbase://h/b?enable_dns_srv=perhaps":         "not a boolean",
		"memcached://h?bootstrap_on=http":                "memcached:// has no cluster configs",
		"couchbase://h:9000=http/b?bootstrap_on=cccp":    "the =http hosts [h:9000] would not be used",
		"couchbase://h,h2:9000=http/b?bootstrap_on=cccp": "would not be used",
	} {
		cs, err := ParseConnStr(connStr)
		require.NoError(t, err, connStr)
		_, err = Options{}.resolved(cs)
		require.Error(t, err, connStr)
		assert.ErrorIs(t, err, ErrInvalidArgument, connStr)
		assert.Contains(t, err.Error(), want, connStr)
	}
	cs, err := ParseConnStr("couchbase://h/b")
	require.NoError(t, err)
	_, err = Options{BootstrapOn: "carrier pigeon"}.resolved(cs)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "Options.BootstrapOn")
}

// FuzzParseConnStr: ParseConnStr never panics; every error it returns
// matches ErrInvalidConnStr (internal/connstr's FuzzParse holds the
// grammar's own errors to *connstr.Error; this holds the public mapping of
// them); whatever parses has a stable canonical form.
func FuzzParseConnStr(f *testing.F) {
	for _, s := range []string{
		"couchbase://h1,h2:11210/bucket?kv_timeout=2500ms&network=external",
		"couchbases://[::1]:11207", "memcached://a,b:1", "h", "couchbase://h/%41", "couchbase://h?bucket=x",
		"couchbase://h:9000=http,h2=mcd/b?bootstrap_on=http", "couchbases://cb.example.cloud?enable_dns_srv=false",
		"", "couchbase://", "ftp://h", "couchbase://h?nope=1", "couchbase://h:8091", "memcached://h/b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseConnStr(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidConnStr) {
				t.Fatalf("error %v does not match ErrInvalidConnStr", err)
			}
			var ce *ConnStrError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConnStrError", err)
			}
			return
		}
		if len(cs.Hosts)+len(cs.HTTPHosts) == 0 {
			t.Fatalf("parsed %q with no hosts", s)
		}
		again, err := ParseConnStr(cs.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", cs.String(), s, err)
		}
		if again.String() != cs.String() {
			t.Fatalf("canonical form not stable: %q -> %q", cs.String(), again.String())
		}
	})
}

// TestConnStrErrorsHideThePassword: a connection string written with its
// credentials (user:password@host, as gocbcore and libcouchbase accept, or
// libcouchbase's ?password= and ?pass=) is refused, and the error, which
// quotes the input and ends up in logs, does not carry the password.
func TestConnStrErrorsHideThePassword(t *testing.T) {
	const pw = "s3cr3t-pw"
	cases := map[string]string{
		"couchbase://app:" + pw + "@h/b":           "credentials",
		"couchbase://app:" + pw + "@h:11210/b":     "credentials",
		"couchbases://app:" + pw + "@h1,h2/b":      "credentials",
		"memcached://app:" + pw + "@h":             "credentials",
		"app:" + pw + "@h/b":                       "credentials",
		"couchbase://app:" + pw + "/x@h/b":         "credentials", // a '/' in the password
		"couchbase://app:" + pw + "@x:y@h/b":       "credentials", // an '@' and a ':' in the password
		"couchbase://app:" + pw + "?x@h/b":         "credentials", // a '?' in the password
		"couchbase://app:" + pw + "?x=y@h/b":       "credentials", // a '?' then an '=' in the password
		"couchbase://app:" + pw + "?x&y@h/b":       "credentials", // a '?' then an '&' in the password
		"couchbase://app:x@" + pw + "?y@h/b":       "credentials", // an '@' then a '?' in the password
		"couchbase://h/b?password=" + pw:           `unknown option "password"`,
		"couchbase://h/b?kv_timeout=1s&pass=" + pw: `unknown option "pass"`,
		"couchbase://h/b?PASSWORD=" + pw + "&x=1":  `unknown option "PASSWORD"`,
		"couchbase://h/b?password=" + pw + "%zz":   "options",
		"couchbase://h/b?password=" + pw + ";x=1":  "options",
		"couchbase://h/b?password=" + pw + "@x":    `unknown option "password"`,
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			_, err := ParseConnStr(in)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidConnStr)
			assert.Contains(t, err.Error(), want)
			assert.NotContains(t, err.Error(), pw[:4], "the error holds the password")
			_, err = Connect(context.Background(), in, &Options{})
			require.Error(t, err)
			assert.NotContains(t, err.Error(), pw[:4], "Connect's error holds the password")
		})
	}
}

// TestConnStrAtInOptionValue: an '@' in a known option's value is not
// credentials, whatever the hosts look like.
func TestConnStrAtInOptionValue(t *testing.T) {
	for _, in := range []string{
		"couchbase://h/b?network=a@b",
		"couchbase://h:11210/b?kv_timeout=1s&network=a@b",
		"couchbase://[::1]:11210?network=a@b",
		"couchbase://h?bucket=b&network=a@b@c",
	} {
		cs, err := ParseConnStr(in)
		require.NoError(t, err, in)
		assert.Contains(t, cs.Options["network"], "a@b", in)
	}
}

// String writes the struct as it is: a ConnStr parsed from a DNS SRV name
// whose Hosts (or Scheme) were changed is written with the hosts it now
// has, not with the name it was parsed from.
func TestConnStrStringAfterSRVHostsChanged(t *testing.T) {
	cs, err := ParseConnStr("couchbase://cb.example.com/b")
	require.NoError(t, err)
	assert.Equal(t, "couchbase://cb.example.com/b", cs.String())
	cs.Hosts = []string{"10.0.0.1:11210"}
	assert.Equal(t, "couchbase://10.0.0.1:11210/b", cs.String())

	cs, err = ParseConnStr("couchbase://cb.example.com/b")
	require.NoError(t, err)
	cs.Scheme = SchemeCouchbases
	again, err := ParseConnStr(cs.String())
	require.NoError(t, err)
	assert.Equal(t, cs.Hosts, again.Hosts, "%s: the host's port is kept", cs.String())
}

// An option given without a value (name= or a bare name) is refused,
// naming it, as libcouchbase refuses it: network= and profile= used to
// be taken as "", silently overriding Options.Network and Options.Profile
// with the defaults, and bucket= as no bucket.
func TestConnStrEmptyOptionValueRefused(t *testing.T) {
	for _, s := range []string{"couchbase://h/b?network=", "couchbase://h/b?profile=", "couchbase://h?bucket=",
		"couchbase://h/b?kv_timeout=2s&network", "memcached://h?remove_failed_servers="} {
		_, err := ParseConnStr(s)
		var ce *ConnStrError
		require.ErrorAs(t, err, &ce, "%q", s)
		assert.Contains(t, ce.Reason, "no value", "%q", s)
	}
}
