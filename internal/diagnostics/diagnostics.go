// Package diagnostics is the logic of the client's health check reports
// (Couchbase SDK RFC 0034, "Health Check", in its SDK 3 form, RFC 0061):
// the cluster state a report's endpoints sum up to, whether a state is the
// one a wait asks for, the wait itself and the error it ends with, and the
// report's JSON (version 2). The report's types are the client's; it hands
// its endpoints here one by one.
package diagnostics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/retry"
)

// State is a cluster state; the client's ClusterState has its values.
type State uint8

// Cluster states.
const (
	Online   State = iota // every endpoint is connected
	Degraded              // at least one endpoint of each service is connected, not all
	Offline               // a service has no endpoint connected
)

var stateNames = [...]string{"online", "degraded", "offline"}

// String is the state's name in RFC 0061's JSON.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "ClusterState(" + strconv.Itoa(int(s)) + ")"
}

var endpointStateNames = [...]string{"connecting", "connected", "reconnecting", "disconnecting", "disconnected"}

// EndpointStateName is the name of endpoint state s (the client's
// EndpointState, internal/cluster's values) in RFC 0034's JSON.
func EndpointStateName(s uint8) string {
	if int(s) < len(endpointStateNames) {
		return endpointStateNames[s]
	}
	return "EndpointState(" + strconv.Itoa(int(s)) + ")"
}

// Summary sums up endpoints into a cluster state.
type Summary struct {
	up       map[string]bool // service -> one of its endpoints is connected
	notAllUp bool
}

// Add counts one endpoint of service, connected or not.
func (s *Summary) Add(service string, connected bool) {
	if s.up == nil {
		s.up = make(map[string]bool)
	}
	s.up[service] = s.up[service] || connected
	s.notAllUp = s.notAllUp || !connected
}

// State is the cluster's state: online when every endpoint is connected,
// offline when a service has none connected (or there is no endpoint at
// all), degraded otherwise.
func (s *Summary) State() State {
	if len(s.up) == 0 {
		return Offline
	}
	for _, ok := range s.up {
		if !ok {
			return Offline
		}
	}
	if !s.notAllUp {
		return Online
	}
	return Degraded
}

// Reached reports whether state satisfies desired.
func Reached(state, desired State) bool {
	switch desired {
	case Online:
		return state == Online
	case Degraded:
		return state == Online || state == Degraded
	}
	return false
}

// notWaitable refuses desired, Offline or no state at all, as a state to
// wait for, naming it as client names its ClusterStates.
func notWaitable(desired State) error {
	name := "ClusterOffline"
	if desired != Offline {
		name = desired.String() // ClusterState(n)
	}
	return fmt.Errorf("%w: WaitUntilReady waits for ClusterOnline or ClusterDegraded, not %s", kverr.ErrInvalidArgument, name)
}

// WaitFor checks a wait's options and returns its timeout (def when
// timeout is 0): a negative timeout is refused, and so is a desired state
// other than Online and Degraded (kverr.ErrInvalidArgument).
func WaitFor(desired State, timeout, def time.Duration) (time.Duration, error) {
	if timeout < 0 {
		return 0, fmt.Errorf("%w: WaitUntilReadyOptions.Timeout %v is negative", kverr.ErrInvalidArgument, timeout)
	}
	if desired == Offline || desired > Offline {
		return 0, notWaitable(desired)
	}
	if timeout == 0 {
		timeout = def
	}
	return timeout, nil
}

// End is how a wait for a cluster state ended.
type End uint8

// Ends of a wait.
const (
	Ready    End = iota // the state was reached
	TimedOut            // the timeout or ctx's deadline passed first
	Canceled            // ctx was cancelled
	Closed              // the client closed
)

// Wait waits until state() satisfies desired, and returns as soon as it
// does: changed (taken before each reading of state, so that no change
// between the two is missed) tells it of each change, no polling. It ends
// short when timeout (counted on clock) or ctx's deadline passes, ctx is
// cancelled, or closed is closed, and returns how it ended and how long it
// waited.
func Wait(ctx context.Context, clock retry.Clock, timeout time.Duration, closed <-chan struct{}, changed func() <-chan struct{}, state func() State, desired State) (End, time.Duration) {
	start := clock.Now()
	timer := clock.NewTimer(timeout)
	defer timer.Stop()
	for {
		ch := changed()
		if Reached(state(), desired) {
			return Ready, 0
		}
		select {
		case <-ch:
		case <-timer.C():
			return TimedOut, clock.Now().Sub(start)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return TimedOut, clock.Now().Sub(start)
			}
			return Canceled, clock.Now().Sub(start)
		case <-closed:
			return Closed, clock.Now().Sub(start)
		}
	}
}

// NotReadyMessage is the message of a wait for desired that ended short
// (canceled, or timed out) after waited with the cluster in state: node
// (none: "") is the first node out, in nodeState, and err why (nil: not
// known).
func NotReadyMessage(desired, state State, waited time.Duration, canceled bool, node, nodeState string, err error) string {
	why := "timed out"
	if canceled {
		why = "canceled"
	}
	s := fmt.Sprintf("kvwire: cluster not %s after %v (%s, it is %s)", desired, waited.Round(time.Millisecond), why, state)
	if node != "" {
		s += fmt.Sprintf(": node %s is %s", node, nodeState)
		if err != nil {
			s += ": " + err.Error()
		}
	}
	return s
}

// version is RFC 0061's report version.
const version = 2

// Report is a report as RFC 0061's JSON has it.
type Report struct {
	Version  int                         `json:"version"`
	ID       string                      `json:"id"`
	SDK      string                      `json:"sdk"`
	State    string                      `json:"state"`
	Services map[string][]endpointReport `json:"services"`

	at time.Time
}

type endpointReport struct {
	ID             string  `json:"id"`
	LastActivityUs *uint64 `json:"last_activity_us,omitempty"`
	Remote         string  `json:"remote"`
	Local          string  `json:"local,omitempty"`
	State          string  `json:"state"`
	Namespace      string  `json:"namespace,omitempty"`
	Details        string  `json:"details,omitempty"`
}

// NewReport starts the report id of the client sdk, made at at, whose
// cluster is in state (its name).
func NewReport(id, sdk, state string, at time.Time) *Report {
	return &Report{Version: version, ID: id, SDK: sdk, State: state, Services: make(map[string][]endpointReport), at: at}
}

// Endpoint is one endpoint as the report writes it.
type Endpoint struct {
	Service, ID string
	// Remote is the node's address as the config gives it; Local the
	// connection's socket, empty while it has none.
	Remote, Local string
	State         string // its name
	Namespace     string // the bucket
	LocalID       string
	LastActivity  time.Time // zero: none
	Err           error
}

// Add adds e, under its service: last_activity_us is the time from its
// last activity to the report (absent when there was none); details hold
// the local id of a connected endpoint, and the error of one that is not.
func (r *Report) Add(e Endpoint) {
	je := endpointReport{ID: e.ID, Remote: e.Remote, Local: e.Local, State: e.State, Namespace: e.Namespace}
	if !e.LastActivity.IsZero() {
		us := uint64(max(r.at.Sub(e.LastActivity), 0) / time.Microsecond)
		je.LastActivityUs = &us
	}
	switch {
	case e.Err != nil:
		je.Details = e.Err.Error()
	case e.LocalID != "":
		je.Details = "local id " + e.LocalID
	}
	r.Services[e.Service] = append(r.Services[e.Service], je)
}

var pingStateNames = [...]string{"ok", "timeout", "error"}

// PingStateName is the name of ping state s (the client's PingState) in
// RFC 0034's JSON.
func PingStateName(s uint8) string {
	if int(s) < len(pingStateNames) {
		return pingStateNames[s]
	}
	return "PingState(" + strconv.Itoa(int(s)) + ")"
}

// PingReport is a ping report as RFC 0061's JSON has it (RFC 0034's
// shape, version 2, with RFC 0034's config_rev).
type PingReport struct {
	Version   int                             `json:"version"`
	ID        string                          `json:"id"`
	ConfigRev *uint64                         `json:"config_rev,omitempty"`
	SDK       string                          `json:"sdk"`
	Services  map[string][]endpointPingReport `json:"services"`
}

type endpointPingReport struct {
	ID        string `json:"id"`
	LatencyUs uint64 `json:"latency_us"`
	Remote    string `json:"remote"`
	Local     string `json:"local,omitempty"`
	State     string `json:"state"`
	Namespace string `json:"namespace,omitempty"`
	Error     string `json:"error,omitempty"`
}

// NewPingReport starts the ping report id of the client sdk, made on the
// config of revision rev (nil: no config, a memcached cluster).
func NewPingReport(id, sdk string, rev *uint64) *PingReport {
	return &PingReport{Version: version, ID: id, ConfigRev: rev, SDK: sdk, Services: make(map[string][]endpointPingReport)}
}

// PingEndpoint is one node's ping as the report writes it.
type PingEndpoint struct {
	Service, ID string
	// Remote is the node's address as the config gives it; Local the
	// socket of the connection the NOOP went on, empty when none.
	Remote, Local string
	State         string // its name
	Namespace     string // the bucket
	Latency       time.Duration
	Err           error
}

// Add adds e under its service: latency_us is its latency in whole
// microseconds, error the error of a ping that was not ok.
func (r *PingReport) Add(e PingEndpoint) {
	je := endpointPingReport{ID: e.ID, LatencyUs: uint64(max(e.Latency, 0) / time.Microsecond), Remote: e.Remote,
		Local: e.Local, State: e.State, Namespace: e.Namespace}
	if e.Err != nil {
		je.Error = e.Err.Error()
	}
	r.Services[e.Service] = append(r.Services[e.Service], je)
}
