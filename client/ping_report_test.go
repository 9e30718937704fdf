package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A ping report marshals to RFC 0061's JSON (RFC 0034's ping report,
// version 2): its id, the config's revision, the sdk, and under "kv" each
// node's endpoint id, latency in whole microseconds, remote (the node's
// address), local socket, state (ok, timeout, error), namespace (the
// bucket) and, when not ok, the error. Tools that read SDKs' ping reports
// find nothing else: before, Ping's results had no report, id, revision
// nor JSON at all.
func TestPingReportJSON(t *testing.T) {
	r := &PingReport{ID: "report-1", SDK: "kvwire", ConfigRev: 53, HasConfigRev: true, Endpoints: []PingEndpoint{
		{Service: ServiceKV, ID: "10.0.0.1:11210/0", Bucket: "travel-sample", PingResult: PingResult{Node: "10.0.0.1:11210",
			Latency: 1182*time.Microsecond + 999*time.Nanosecond, Local: "10.0.0.9:54670", Remote: "10.0.0.1:11210", LocalID: "A/B"}},
		{Service: ServiceKV, ID: "10.0.0.2:11210/0", Bucket: "travel-sample", PingResult: PingResult{Node: "10.0.0.2:11210",
			Latency: 2500 * time.Millisecond, Local: "10.0.0.9:54671", Remote: "10.0.0.2:11210",
			Err: &NotReadyError{Desired: ClusterOnline}}}, // a timeout
		{Service: ServiceKV, ID: "10.0.0.3:11210", Bucket: "travel-sample", PingResult: PingResult{Node: "10.0.0.3:11210",
			Latency: 3 * time.Microsecond, Err: errors.New("no connection")}},
	}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"version":2,"id":"report-1","config_rev":53,"sdk":"kvwire","services":{"kv":[
		{"id":"10.0.0.1:11210/0","latency_us":1182,"remote":"10.0.0.1:11210","local":"10.0.0.9:54670","state":"ok","namespace":"travel-sample"},
		{"id":"10.0.0.2:11210/0","latency_us":2500000,"remote":"10.0.0.2:11210","local":"10.0.0.9:54671","state":"timeout",
		 "namespace":"travel-sample","error":"`+r.Endpoints[1].Err.Error()+`"},
		{"id":"10.0.0.3:11210","latency_us":3,"remote":"10.0.0.3:11210","state":"error","namespace":"travel-sample","error":"no connection"}]}}`, string(b))

	// memcached:// has no config: no config_rev.
	b, err = json.Marshal(&PingReport{ID: "r", SDK: "kvwire"})
	require.NoError(t, err)
	require.JSONEq(t, `{"version":2,"id":"r","sdk":"kvwire","services":{}}`, string(b))

	assert.Equal(t, "ok", PingOK.String())
	assert.Equal(t, "timeout", PingTimeout.String())
	assert.Equal(t, "error", PingError.String())
	assert.Equal(t, "PingState(9)", PingState(9).String())
}

// PingReport pings each node once, takes the report id asked for (a
// random one otherwise), gives the revision of the config it ran on, names
// each endpoint as Diagnostics does, and says which node timed out.
func TestPingReportOfTheCluster(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, nil)
	require.NoError(t, c.WaitUntilReady(context.Background(), nil))

	r := c.PingReport(context.Background(), &PingOptions{ReportID: "my-report"})
	assert.Equal(t, "my-report", r.ID)
	assert.Equal(t, c.opts.ClientName, r.SDK)
	require.True(t, r.HasConfigRev)
	assert.Equal(t, c.cl.Topology().Config().Version().Rev, r.ConfigRev)
	d := c.Diagnostics(nil)
	ids := make(map[string]bool)
	for _, e := range d.Endpoints {
		ids[e.ID] = true
	}
	require.Len(t, r.Endpoints, 2)
	for _, e := range r.Endpoints {
		assert.Equal(t, PingOK, e.State(), "%s: %v", e.Node, e.Err)
		assert.True(t, ids[e.ID], "endpoint id %q is one of Diagnostics' %v", e.ID, ids)
		assert.Equal(t, ServiceKV, e.Service)
		assert.Equal(t, mockcluster.DefaultBucket, e.Bucket)
	}
	assert.NotEmpty(t, c.PingReport(context.Background(), nil).ID)

	// One node's NOOP held past the ping's deadline: that node timed out.
	// (The other's state is not asserted: on a loaded machine its answer
	// may come after the deadline too.)
	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpNoop},
		Nodes: []int{1}}, Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(held.Remove)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r = c.PingReport(ctx, nil)
	states := make(map[string]PingState)
	for _, e := range r.Endpoints {
		states[e.Node] = e.State()
	}
	require.Len(t, states, 2)
	assert.Equal(t, PingTimeout, states[mc.Node(1).Addr()])
}
