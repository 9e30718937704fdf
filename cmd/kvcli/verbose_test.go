package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestVerboseLogsReportsAsJSON: -v logs the client's reports (here the
// logging meter's, which the client logs when it closes) as their JSON,
// not as the decimal bytes of it.
func TestVerboseLogsReportsAsJSON(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "set", "k", "v")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", "k", "-v")
	require.Equal(t, exitOK, r.code, r)
	var line string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, client.LoggingMeterMessage) {
			line = l
		}
	}
	require.NotEmpty(t, line, "-v logs the logging meter's report at close:\n%s", r.stderr)
	assert.Contains(t, line, ` report="{\"meta\":`, "the report's JSON text")
	assert.NotRegexp(t, `report="?\[`, line, "not its bytes")
}
