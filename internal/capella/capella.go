// Package capella holds Couchbase Capella's root CA, which couchbases://
// trusts besides the system roots (as Couchbase's SDKs do), and puts it
// into a TLS config that names no roots of its own.
package capella

import (
	"crypto/tls"
	"crypto/x509"
	_ "embed" // the Capella root CA
	"encoding/pem"
	"errors"
	"slices"
	"sync"
)

// rootCAPEM is the root CA that signs the certificates of Couchbase
// Capella's clusters (subject and issuer O=Couchbase, OU=Cloud; valid from
// 2019-12-06 to 2029-12-06; SHA-256 fingerprint
// D0:93:7E:9C:93:4B:2D:AB:94:ED:7A:4B:91:C5:48:E7:9E:EC:CA:99:2B:27:AB:6D:26:20:80:7E:68:65:7C:0E),
// byte for byte the PEM that Couchbase bundles in its SDKs: gocbcore v10
// capella_ca.go (capellaRootCA, added to the system roots when TLS is on
// and no root CA is given), and the same certificate in couchbase-cxx-client
// core/capella_ca.hxx and libcouchbase's SSL setup.
//
//go:embed root_ca.pem
var rootCAPEM []byte

// PEM returns a copy of the root CA's PEM.
func PEM() []byte { return slices.Clone(rootCAPEM) }

// RootCA is the parsed certificate.
var RootCA = sync.OnceValues(func() (*x509.Certificate, error) {
	b, _ := pem.Decode(rootCAPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("the bundled Capella root CA is not a PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
})

// WithRoots returns cfg for a couchbases:// connection: when it
// names no roots of its own (and verifies), a clone whose RootCAs are the
// system roots and Capella's root CA, as gocbcore does; otherwise cfg as
// it is. Where the system roots cannot be loaded, cfg is left to them
// (Go's default) and the error is returned for the log.
func WithRoots(cfg *tls.Config) (*tls.Config, error) {
	if cfg == nil {
		cfg = &tls.Config{}
	}
	if cfg.RootCAs != nil || cfg.InsecureSkipVerify {
		return cfg, nil
	}
	ca, err := RootCA()
	if err != nil {
		return cfg, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		return cfg, err
	}
	pool.AddCert(ca)
	cfg = cfg.Clone()
	cfg.RootCAs = pool
	return cfg, nil
}
