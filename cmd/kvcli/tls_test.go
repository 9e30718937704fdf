package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestCACertOnlyForTLS: only couchbases:// and memcacheds:// use TLS. KVCLI_CACERT (which
// serve --tls exports) is ignored by couchbase:// and memcached://, an
// explicit --cacert with them is a usage error, and a failed handshake
// suggests --cacert only when an unknown CA is the cause.
func TestCACertOnlyForTLS(t *testing.T) {
	mc, err := mockcluster.New(mockcluster.Options{Nodes: 1, TLS: true})
	require.NoError(t, err)
	t.Cleanup(mc.Close)
	other, err := mockcluster.New(mockcluster.Options{Nodes: 1, TLS: true})
	require.NoError(t, err)
	t.Cleanup(other.Close)

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, mc.CACertPEM(), 0o600))
	otherCA := filepath.Join(dir, "other-ca.pem")
	require.NoError(t, os.WriteFile(otherCA, other.CACertPEM(), 0o600))

	plain := "couchbase://" + strings.Join(mc.Addrs(), ",") + "/" + mockcluster.DefaultBucket
	tlsConn := "couchbases://" + strings.Join(mc.TLSAddrs(), ",") + "/" + mockcluster.DefaultBucket
	env := map[string]string{envUser: mockcluster.DefaultUser, envPassword: mockcluster.DefaultPassword}

	// KVCLI_CACERT left over from serve --tls: couchbase:// stays plain.
	r := runKV(t, with(env, envConnStr, plain, envCACert, ca), "", "set", "k", "plain")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, with(env, envConnStr, tlsConn, envCACert, ca), "", "get", "k")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "plain", r.stdout)

	// --cacert with a scheme that is not TLS: a usage error, before connecting.
	for _, cs := range []string{plain, "memcached://127.0.0.1:1"} {
		r = runKV(t, with(env, envConnStr, cs), "", "get", "k", "--cacert", ca)
		assert.Equal(t, exitUsage, r.code, "%s: %s", cs, r)
		assert.Contains(t, r.stderr, "only couchbases:// and memcacheds:// use TLS", cs)
	}
	// Given before the command name too.
	r = runKV(t, with(env, envConnStr, plain), "", "--cacert", ca, "get", "k")
	assert.Equal(t, exitUsage, r.code, r)

	// couchbases:// to a plain port: not a CA problem. (The mock hangs up
	// on the ClientHello; whether that is reported as a TLS failure or as
	// a network one is conn's choice, and the hint is the same.)
	r = runKV(t, with(env, envConnStr, "couchbases://"+mc.Addrs()[0]+"/default"), "", "get", "k", "--cacert", ca)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "is that port a TLS port?")
	assert.NotContains(t, r.stderr, "pass --cacert")

	// The wrong CA: says so, rather than suggesting --cacert again.
	r = runKV(t, with(env, envConnStr, tlsConn), "", "get", "k", "--cacert", otherCA)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "no CA in "+otherCA+" signed the server's certificate")

	// No CA at all: the system roots do not know the mock's CA.
	r = runKV(t, with(env, envConnStr, tlsConn), "", "get", "k")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "pass --cacert FILE or set KVCLI_CACERT")
}

// TestTLSHints: explain's advice for each kind of handshake failure, from
// constructed errors (as client.Connect builds them).
func TestTLSHints(t *testing.T) {
	connErr := func(sentinel, cause error) error {
		return &client.ConnectError{Hosts: []string{"h:11207"}, Err: sentinel, Cause: cause, All: []error{cause}}
	}
	unknownCA := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	for _, tc := range []struct {
		name, connStr, cacert string
		err                   error
		want, notWant         string
	}{
		{"unknown CA, none given", "couchbases://h/b", "", connErr(client.ErrTLS, unknownCA),
			"(for a cluster with its own CA pass --cacert FILE or set KVCLI_CACERT)", ""},
		{"unknown CA, wrong one given", "couchbases://h/b", "/x/ca.pem", connErr(client.ErrTLS, unknownCA),
			"(no CA in /x/ca.pem signed the server's certificate: is it the cluster's CA?)", "pass --cacert"},
		{"host name", "couchbases://h/b", "", connErr(client.ErrTLS, &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{DNSNames: []string{"other"}}, Host: "h"}}),
			"(connect by a host name or address the certificate lists)", "--cacert"},
		{"not TLS", "couchbases://h/b", "", connErr(client.ErrTLS, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}),
			notTLSPort, "--cacert"},
		{"hung up, as a TLS error", "couchbases://h/b", "", connErr(client.ErrTLS, io.EOF),
			notTLSPort, "--cacert"},
		{"hung up, as a network error", "couchbases://h/b", "", connErr(client.ErrNoNodeAvailable, fmt.Errorf("conn h:11207: TLS handshake: %w", io.EOF)),
			"cannot reach h:11207: EOF" + notTLSPort, "--cacert"},
		{"hung up without TLS", "couchbase://h/b", "", connErr(client.ErrNoNodeAvailable, io.EOF),
			"cannot reach h:11207: EOF", "TLS"},
	} {
		inv := &invocation{env: &env_{getenv: func(string) string { return "" }}}
		inv.g.connStr, inv.g.cacert = tc.connStr, tc.cacert
		p := inv.explain("", tc.err)
		assert.Equal(t, exitError, p.code, tc.name)
		assert.Contains(t, p.line, tc.want, tc.name)
		if tc.notWant != "" {
			assert.NotContains(t, p.line, tc.notWant, tc.name)
		}
	}
}
