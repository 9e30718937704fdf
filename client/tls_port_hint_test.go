package client

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// couchbase:// pointed at a KV TLS port fails naming the fix; it used to
// fail with only "bootstrap HELLO: no response: ... read: EOF".
func TestConnectWrongSchemeForPortSaysSo(t *testing.T) {
	mc := newMock(t, mockcluster.Options{TLS: true})
	_, err := connectString(t, "couchbase://"+mc.Node(0).TLSAddr()+"/"+mockcluster.DefaultBucket,
		&Options{ConnectTimeout: 2e9})
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "looks like a TLS port: use couchbases://"), "%v", err)

}
