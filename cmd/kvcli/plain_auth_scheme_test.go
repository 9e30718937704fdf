package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/mockcluster"
)

// --allow-plain-auth is plain memcached's opt-in: on couchbase:// it would
// let a node offering only PLAIN (or a path that strips SCRAM from the
// mechanism list) have the password in clear, so kvcli refuses it as a
// usage error before connecting.
func TestAllowPlainAuthRefusedOutsideMemcached(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "--allow-plain-auth", "get", "k")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, "--allow-plain-auth is for memcached:// only")
}
