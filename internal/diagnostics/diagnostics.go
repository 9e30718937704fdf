// Package diagnostics is the logic of the client's health check reports
// (Couchbase SDK RFC 0034, "Health Check", in its SDK 3 form, RFC 0061):
// the cluster state a report's endpoints sum up to, whether a state is the
// one a wait asks for, and the report's JSON (version 2). The report's
// types are the client's; it hands its endpoints here one by one.
package diagnostics

import "time"

// State is a cluster state; the client's ClusterState has its values.
type State uint8

// Cluster states.
const (
	Online   State = iota // every endpoint is connected
	Degraded              // at least one endpoint of each service is connected, not all
	Offline               // a service has no endpoint connected
)

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
