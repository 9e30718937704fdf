package client

import "github.com/kvwire/kvwire/internal/capella"

// CapellaRootCAPEM returns the PEM of Couchbase Capella's root CA, which
// couchbases:// trusts besides the system roots unless Options.TLSConfig
// names its own RootCAs. A caller with its own roots adds it to them to
// reach Capella too.
func CapellaRootCAPEM() []byte { return capella.PEM() }
