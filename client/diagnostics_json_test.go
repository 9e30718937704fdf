package client

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A diagnostics report marshals to RFC 0061's JSON: version 2, the
// cluster's state, the endpoints by service with their id, remote (the
// node's address), local socket, state, namespace (the bucket), the time
// since their last activity in microseconds (absent when there was none),
// and details: a connected endpoint's local id, another's error.
func TestDiagnosticsJSON(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &DiagnosticsResult{ID: "report-1", SDK: "kvwire", State: ClusterDegraded, At: at, Endpoints: []EndpointDiagnostics{
		{Service: ServiceKV, ID: "10.0.0.1:11210/0", Node: "10.0.0.1:11210", Local: "10.0.0.9:54670", Remote: "10.0.0.1:11210",
			LocalID: "66388CF5BFCF7522/18CC8791579B567C", State: EndpointConnected, LastActivity: at.Add(-1182 * time.Microsecond), Bucket: "travel-sample"},
		{Service: ServiceKV, ID: "10.0.0.2:11210/0", Node: "10.0.0.2:11210", State: EndpointReconnecting,
			LastActivity: at.Add(-3 * time.Second), Bucket: "travel-sample", Err: errors.New("dial tcp 10.0.0.2:11210: connection refused")},
		{Service: ServiceKV, ID: "10.0.0.3:11210/0", Node: "10.0.0.3:11210", State: EndpointConnecting, Bucket: "travel-sample"},
	}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"version":2,"id":"report-1","sdk":"kvwire","state":"degraded","services":{"kv":[
		{"id":"10.0.0.1:11210/0","last_activity_us":1182,"remote":"10.0.0.1:11210","local":"10.0.0.9:54670","state":"connected",
		 "namespace":"travel-sample","details":"local id 66388CF5BFCF7522/18CC8791579B567C"},
		{"id":"10.0.0.2:11210/0","last_activity_us":3000000,"remote":"10.0.0.2:11210","state":"reconnecting",
		 "namespace":"travel-sample","details":"dial tcp 10.0.0.2:11210: connection refused"},
		{"id":"10.0.0.3:11210/0","remote":"10.0.0.3:11210","state":"connecting","namespace":"travel-sample"}]}}`, string(b))
}

// The cluster's state: online when every endpoint is connected, degraded
// when some are, offline when none of a service's are (or there are none).
// (Which states a wait accepts: internal/diagnostics' TestReached.)
func TestClusterState(t *testing.T) {
	ep := func(s EndpointState) EndpointDiagnostics { return EndpointDiagnostics{Service: ServiceKV, State: s} }
	for _, tc := range []struct {
		eps  []EndpointDiagnostics
		want ClusterState
	}{
		{nil, ClusterOffline},
		{[]EndpointDiagnostics{ep(EndpointConnected), ep(EndpointConnected)}, ClusterOnline},
		{[]EndpointDiagnostics{ep(EndpointConnected), ep(EndpointReconnecting)}, ClusterDegraded},
		{[]EndpointDiagnostics{ep(EndpointConnecting), ep(EndpointReconnecting), ep(EndpointDisconnected)}, ClusterOffline},
	} {
		assert.Equal(t, tc.want, clusterState(tc.eps), "%v", tc.eps)
	}
	assert.Equal(t, "reconnecting", EndpointReconnecting.String())
	assert.Equal(t, "EndpointState(9)", EndpointState(9).String())
	assert.Equal(t, "ClusterState(7)", ClusterState(7).String())
}

// A wait that ended short of its state names the first node out, its
// state and error; it is a timeout (or a cancellation) and unwraps to the
// node's error.
func TestNotReadyError(t *testing.T) {
	refused := errors.New("connection refused")
	d := &DiagnosticsResult{State: ClusterDegraded, Endpoints: []EndpointDiagnostics{
		{Node: "a:1", State: EndpointConnected},
		{Node: "b:2", State: EndpointReconnecting, Err: &NodeError{Addr: "b:2", Err: ErrAuthenticationFailure}},
		{Node: "c:3", State: EndpointReconnecting, Err: refused},
	}}
	e := notReady(d, ClusterOnline, 1500*time.Millisecond, false)
	assert.Equal(t, "b:2", e.Node)
	assert.ErrorIs(t, e, ErrUnambiguousTimeout)
	assert.ErrorIs(t, e, ErrTimeout)
	assert.ErrorIs(t, e, ErrAuthenticationFailure)
	assert.NotErrorIs(t, e, ErrRequestCanceled)
	assert.Contains(t, e.Error(), "cluster not online after 1.5s (timed out, it is degraded): node b:2 is reconnecting")
	c := notReady(d, ClusterDegraded, time.Second, true)
	assert.ErrorIs(t, c, ErrRequestCanceled)
	assert.NotErrorIs(t, c, ErrTimeout)
}

// A report marshals to RFC 0061's JSON whether it is marshalled through
// its pointer (as Diagnostics returns it) or as a value (dereferenced, or
// a field of a struct marshalled by value).
func TestDiagnosticsJSONOfAValue(t *testing.T) {
	r := &DiagnosticsResult{ID: "report-1", SDK: "kvwire", State: ClusterOnline, At: time.Unix(1, 0), Endpoints: []EndpointDiagnostics{
		{Service: ServiceKV, ID: "10.0.0.1:11210/0", Node: "10.0.0.1:11210", State: EndpointConnected, Bucket: "b"}}}
	want, err := json.Marshal(r)
	require.NoError(t, err)
	got, err := json.Marshal(*r)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	got, err = json.Marshal(struct{ Report DiagnosticsResult }{*r})
	require.NoError(t, err)
	assert.JSONEq(t, `{"Report":`+string(want)+`}`, string(got))
}
