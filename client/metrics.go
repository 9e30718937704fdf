package client

// Meter makes the instruments the client records metrics with (Couchbase
// SDK RFC 0067, "Observability Metrics"), for a metrics system such as
// OpenTelemetry (the nested module github.com/kvwire/kvwire/kvotel adapts
// one) or Prometheus. The client asks for an instrument once per name and
// attribute set and keeps it (two operations needing the same new one at
// the same moment may both ask, the first answer kept: the client never
// waits for a Meter while holding a lock; and past a few thousand attribute
// sets kept, as collections made and dropped over a long life add theirs,
// it drops those it keeps, at most once a minute, and asks again for those
// it needs next, meanwhile asking at each use for one it could not keep:
// so a Meter should return the same instrument when asked again for one),
// so a Meter may do real work there (attributes are strings: service,
// operation, bucket, scope, collection, cluster labels, error type);
// recording on an instrument is the hot path and should not allocate.
//
// The client's one required metric is MetricOperationDuration: a value
// recorder per operation outcome, recording each operation's latency in
// microseconds from its start to its result, retries included, with
// AttributeService, AttributeOperationName, AttributeBucketName,
// AttributeScopeName, AttributeCollectionName (these three when the
// operation has them: not a memcached:// client's bucket, nor a node
// operation's collection), AttributeClusterName and AttributeClusterUUID
// (when the cluster's config publishes them: Couchbase Server 7.6.4 and
// later) and, when it failed, AttributeErrorType (RFC 0058's name,
// "_OTHER" for an error without one).
//
// The client calls a Meter and its instruments on the operation's
// goroutine, never on a connection's reader or writer and never holding a
// lock of the client's. An error from a Meter, or a panic in it or an
// instrument, is logged, and the client records nothing on that
// instrument; the operation goes on.
//
// Options.Meter sets it; nil means the logging meter (LoggingMeterOptions),
// on by default as RFC 0067 has it.
type Meter interface {
	// Counter returns a counter for name with the given attributes.
	Counter(name string, attributes map[string]string) (Counter, error)
	// ValueRecorder returns a value recorder (a histogram) for name with
	// the given attributes.
	ValueRecorder(name string, attributes map[string]string) (ValueRecorder, error)
}

// Counter counts up.
type Counter interface {
	IncrementBy(n uint64)
}

// ValueRecorder records values into a distribution.
type ValueRecorder interface {
	RecordValue(v uint64)
}

// MetricOperationDuration is the metric of operation latencies, in
// microseconds (RFC 0067's "db.client.operation.duration"; an
// OpenTelemetry meter reports it in seconds, unit "s", as the semantic
// conventions want).
const MetricOperationDuration = "db.client.operation.duration"

// ErrorTypeOther is AttributeErrorType's value for an error that has no
// RFC 0058 name.
const ErrorTypeOther = "_OTHER"

// meterOn reports whether m records anything: the client asks a Meter
// for no instrument, and records nothing, when it does not (nil,
// NoopMeter).
func meterOn(m Meter) bool {
	switch m.(type) {
	case nil, NoopMeter, *NoopMeter:
		return false
	}
	return true
}

// NoopMeter is a Meter whose instruments record nothing and allocate
// nothing.
type NoopMeter struct{}

// Counter returns a counter that counts nothing.
func (NoopMeter) Counter(string, map[string]string) (Counter, error) { return noopInstrument{}, nil }

// ValueRecorder returns a recorder that records nothing.
func (NoopMeter) ValueRecorder(string, map[string]string) (ValueRecorder, error) {
	return noopInstrument{}, nil
}

type noopInstrument struct{}

func (noopInstrument) IncrementBy(uint64) {}
func (noopInstrument) RecordValue(uint64) {}
