package settings

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/connstr"
)

var (
	errInvalid = errors.New("invalid")
	errConnStr = errors.New("bad option")
	testErrors = Errors{Invalid: errInvalid, ConnStr: func(input, reason string) error {
		return &optionError{input: input, reason: reason}
	}}
)

// optionError is the test's connection-string error.
type optionError struct{ input, reason string }

func (e *optionError) Error() string   { return e.input + ": " + e.reason }
func (e *optionError) Is(t error) bool { return t == errConnStr }

func parse(t *testing.T, s string) *connstr.ConnStr {
	t.Helper()
	cs, err := connstr.Parse(s)
	require.NoError(t, err)
	return cs
}

// Resolve takes the connection string's options over the settings given,
// fills what is left zero from the defaults, and makes its errors with the
// caller's constructors: Errors.ConnStr for an option (bad readers
// included), Errors.Invalid for a setting.
func TestResolve(t *testing.T) {
	d := Defaults{KVTimeout: time.Second, ConnectTimeout: 2 * time.Second, ConfigPollInterval: time.Minute,
		CompressionMinSize: 3, CompressionMinRatio: 0.5, ServerFailureLimit: 4, ProbeAfter: 5, ProbeTimeout: 6,
		ThresholdInterval: time.Hour, KVThreshold: 7, ThresholdSampleSize: 8, OrphanInterval: time.Hour,
		OrphanSampleSize: 9, LoggingMeterInterval: time.Hour, Network: "auto"}
	s := Settings{Bucket: "b", ConnectTimeout: time.Minute}
	require.NoError(t, s.Resolve(parse(t, "couchbase://h/b?kv_timeout=250&compression=off&bootstrap_on=CCCP"), d, testErrors))
	assert.Equal(t, 250*time.Millisecond, s.KVTimeout)
	assert.Equal(t, time.Minute, s.ConnectTimeout, "a setting given is kept")
	assert.Equal(t, Compression{Disabled: true, MinSize: 3, MinRatio: 0.5}, s.Compression)
	assert.Equal(t, BootstrapOnCCCP, s.BootstrapOn)
	assert.Equal(t, "auto", s.Network)
	assert.Equal(t, 1, s.ConnectionsPerNode)
	assert.NotNil(t, s.Logger)
	assert.Nil(t, s.TLSConfig, "couchbase:// has no TLS")

	for connStr, want := range map[string]error{
		"couchbase://h/b?kv_timeout=soon":   errConnStr,
		"couchbase://h/b?kv_pool_size=0":    errConnStr,
		"couchbase://h/b?compression=maybe": errConnStr,
		"couchbase://h/b?tls_verify=none":   errInvalid,
		"couchbase://h":                     errInvalid,
	} {
		s := Settings{}
		if connStr != "couchbase://h" {
			s.Bucket = "b"
		}
		err := s.Resolve(parse(t, connStr), d, testErrors)
		assert.ErrorIs(t, err, want, connStr)
	}
	s = Settings{Bucket: "b", KVTimeout: -1}
	err := s.Resolve(parse(t, "couchbase://h/b"), d, testErrors)
	assert.ErrorIs(t, err, errInvalid)
	assert.ErrorContains(t, err, "Options.KVTimeout")
}

// MergeBucket takes the connection string's bucket, and refuses two that
// differ.
func TestMergeBucket(t *testing.T) {
	s := Settings{}
	require.NoError(t, s.MergeBucket("b", testErrors))
	assert.Equal(t, "b", s.Bucket)
	require.NoError(t, s.MergeBucket("", testErrors))
	require.NoError(t, s.MergeBucket("b", testErrors))
	assert.Equal(t, "b", s.Bucket)
	err := s.MergeBucket("c", testErrors)
	assert.ErrorIs(t, err, errInvalid)
	assert.ErrorContains(t, err, `bucket "c" in the connection string and "b" in Options`)
}

// A ClientName is sent as HELLO's agent and as the User-Agent header of
// every request to the cluster manager; a control character (a newline
// from a config file) is no valid header value, and Go's HTTP client
// refuses every such request: with configs over HTTP nothing would ever
// connect. It is refused up front, naming the option.
func TestClientNameWithControlCharacterIsRefused(t *testing.T) {
	d := Defaults{KVTimeout: time.Second, ConnectTimeout: time.Second}
	for _, name := range []string{"app\n", "a\x00b", "a\rb", "del\x7f", "bad\xffutf8"} {
		s := Settings{Bucket: "b", ClientName: name}
		err := s.Resolve(parse(t, "couchbase://h/b"), d, testErrors)
		assert.ErrorIs(t, err, errInvalid, "%q", name)
		assert.ErrorContains(t, err, "Options.ClientName", "%q", name)
	}
	// A tab is a valid header value (RFC 9110 field-value: HTAB; Go's
	// HTTP client sends it) and JSON escapes it: it worked before the
	// check and still does.
	for _, name := range []string{"my-app/1.2 (linux)", "café", "", "tab\there"} {
		s := Settings{Bucket: "b", ClientName: name}
		assert.NoError(t, s.Resolve(parse(t, "couchbase://h/b"), d, testErrors), "%q", name)
	}
}

// libcouchbase's bootstrap_on=all ("the default behavior": CCCP first,
// then HTTP) is gocbcore's both; it used to be refused.
func TestBootstrapOnAllIsBoth(t *testing.T) {
	for _, v := range []string{"all", "ALL"} {
		s := Settings{Bucket: "b"}
		require.NoError(t, s.Resolve(parse(t, "couchbase://h:9000=http/b?bootstrap_on="+v), Defaults{}, testErrors), v)
		assert.Equal(t, BootstrapOnBoth, s.BootstrapOn, v)
	}
	s := Settings{}
	require.NoError(t, s.Resolve(parse(t, "memcached://h?bootstrap_on=all"), Defaults{}, testErrors))
	assert.Equal(t, BootstrapOnBoth, s.BootstrapOn)
}
