// Package opreport is RFC 0067's two reports of operation records: the
// slow-operation report (threshold logging: the operations over their
// service's threshold) and the orphan report (the responses that came
// after their caller left). Each counts what it is given per service,
// keeps the slowest (the sample size), and logs the count and those
// records as JSON every interval, nothing for an interval without any.
// A record holds no document key or value and no credential, so no report
// can show one.
package opreport

import (
	"strconv"
	"time"
)

// Record is what the slow-operation report and the orphan report say
// about one operation: RFC 0067's entry fields. Its strings are the
// operation's constant name and the connection's own (id, addresses), so
// filling one allocates nothing.
type Record struct {
	Service   string // the client's ServiceKV
	Operation string // the operation's span name: "get", "upsert", ...

	// Total runs from the operation's start to its end; for an orphan,
	// from the last dispatch to the late answer.
	Total time.Duration
	// Encode is the time spent encoding the value (0: none).
	Encode time.Duration
	// Dispatched: the operation was sent at least once; then LastDispatch
	// and TotalDispatch (the sum over every dispatch) hold, as do
	// OperationID (the last request's opaque), LocalID and the sockets.
	Dispatched                  bool
	LastDispatch, TotalDispatch time.Duration
	OperationID                 uint32
	LocalID                     string // the connection's id
	LocalSocket, RemoteSocket   string // "host:port"
	// HasServer: a response carried the server's duration (HELLO
	// Tracing): LastServer is the last one's, TotalServer their sum.
	HasServer               bool
	LastServer, TotalServer time.Duration
	// Timeout is the operation's timeout (0: none known).
	Timeout time.Duration
}

// Entry is a Record as RFC 0067 writes it: microseconds, and fields that
// do not apply left out.
type Entry struct {
	TotalDurationUs         uint64  `json:"total_duration_us"`
	EncodeDurationUs        *uint64 `json:"encode_duration_us,omitempty"`
	LastDispatchDurationUs  *uint64 `json:"last_dispatch_duration_us,omitempty"`
	TotalDispatchDurationUs *uint64 `json:"total_dispatch_duration_us,omitempty"`
	LastServerDurationUs    *uint64 `json:"last_server_duration_us,omitempty"`
	TotalServerDurationUs   *uint64 `json:"total_server_duration_us,omitempty"`
	OperationName           string  `json:"operation_name"`
	LastLocalID             string  `json:"last_local_id,omitempty"`
	OperationID             string  `json:"operation_id,omitempty"`
	LastLocalSocket         string  `json:"last_local_socket,omitempty"`
	LastRemoteSocket        string  `json:"last_remote_socket,omitempty"`
	TimeoutMs               *uint64 `json:"timeout_ms,omitempty"`
}

// Micros is d in whole microseconds (0 for a negative d), as a report's
// optional field.
func Micros(d time.Duration) *uint64 {
	v := uint64(max(d, 0) / time.Microsecond)
	return &v
}

// Entry is r as a report's entry.
func (r *Record) Entry() Entry {
	e := Entry{TotalDurationUs: *Micros(r.Total), OperationName: r.Operation}
	if r.Encode > 0 {
		e.EncodeDurationUs = Micros(r.Encode)
	}
	if r.Dispatched {
		e.LastDispatchDurationUs = Micros(r.LastDispatch)
		e.TotalDispatchDurationUs = Micros(r.TotalDispatch)
		e.OperationID = "0x" + strconv.FormatUint(uint64(r.OperationID), 16)
		e.LastLocalID = r.LocalID
		e.LastLocalSocket = r.LocalSocket
		e.LastRemoteSocket = r.RemoteSocket
	}
	if r.HasServer {
		e.LastServerDurationUs = Micros(r.LastServer)
		e.TotalServerDurationUs = Micros(r.TotalServer)
	}
	if r.Timeout > 0 {
		e.TimeoutMs = new(uint64)
		*e.TimeoutMs = uint64(r.Timeout / time.Millisecond)
	}
	return e
}
