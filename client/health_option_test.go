package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// HealthCheck.Disabled (connection string health_check=false) reaches the
// connections as a negative ProbeAfter, which conn reads as "no probes"
// (conn's TestNegativeProbeAfterSendsNoProbe); by default, and with
// health_check=true, they probe after ProbeAfter.
func TestHealthCheckDisabledReachesConnections(t *testing.T) {
	for _, tc := range []struct {
		connstr string
		opts    Options
		off     bool
	}{
		{"couchbase://h/b", Options{}, false},
		{"couchbase://h/b?health_check=true", Options{}, false},
		{"couchbase://h/b?health_check=false", Options{}, true},
		{"couchbase://h/b", Options{HealthCheck: HealthCheckOptions{Disabled: true}}, true},
		{"memcached://h?health_check=off", Options{}, true},
	} {
		cs, err := ParseConnStr(tc.connstr)
		require.NoError(t, err)
		o, err := tc.opts.resolved(cs)
		require.NoError(t, err, tc.connstr)
		assert.Equal(t, tc.off, o.HealthCheck.Disabled, tc.connstr)
		c := &Client{opts: o, memcached: cs.Scheme == SchemeMemcached, obs: &observers{}}
		pa := c.connOptions().ProbeAfter
		if tc.off {
			assert.Negative(t, pa, "%s: conn's ProbeAfter", tc.connstr)
		} else {
			assert.Equal(t, DefaultProbeAfter, pa, "%s: conn's ProbeAfter", tc.connstr)
		}
	}
	cs, err := ParseConnStr("couchbase://h/b?health_check=sometimes")
	require.NoError(t, err)
	_, err = Options{}.resolved(cs)
	assert.ErrorContains(t, err, "health_check")
}
