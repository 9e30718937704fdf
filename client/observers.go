package client

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// observers are a client's observability components, as Options set them
// up: the tracer and the meter (nil when they record nothing, so that an
// operation makes no call for them), the guard that calls them, the
// slow-operation and orphan reports and the logging meter (nil when off).
// newObservers starts the reports' goroutines; close stops them.
type observers struct {
	hooks *hookGuard
	// tracer is nil for NoopTracer: no span is made.
	tracer RequestTracer
	// meter is nil when nothing is recorded; builtin says it is the
	// logging meter, whose recorders are called without the guard.
	meter   Meter
	builtin bool
	meters  opMeters

	threshold *thresholdLogger // nil: off
	orphans   *orphanReporter  // nil: off
	logMeter  *loggingMeter    // nil: not running

	clock  retry.Clock
	bucket string
	// clientID is RFC 0067's client id, the first half of every
	// connection's local id (conn.Options.ClientID).
	clientID string
}

// newObservers sets up o's observers and starts the reports. o has its
// defaults filled in. Operations are timed on clock (the client's, as
// their deadlines are); the reports' intervals are kept on every, so that
// a test's fake Clock holds no timer of theirs (a report is logged on
// Close too).
func newObservers(o *Options, clock, every retry.Clock, clientID string) *observers {
	ob := &observers{hooks: newHookGuard(o.Logger, every), clock: clock, bucket: o.Bucket, clientID: clientID}
	if tracerOn(o.Tracer) {
		ob.tracer = o.Tracer
	}
	switch {
	case o.Meter != nil:
		if meterOn(o.Meter) {
			ob.meter = o.Meter
		}
	case !o.LoggingMeter.Disabled:
		ob.logMeter = newLoggingMeter(o.LoggingMeter.Interval, every, o.Logger)
		ob.meter, ob.builtin = ob.logMeter, true
	}
	ob.meters.init(ob)
	if !o.ThresholdLogging.Disabled {
		ob.threshold = newThresholdLogger(thresholdConfig{interval: o.ThresholdLogging.Interval,
			kv: o.ThresholdLogging.KVThreshold, sampleSize: o.ThresholdLogging.SampleSize}, every, o.Logger)
	}
	if !o.OrphanReporting.Disabled {
		ob.orphans = newOrphanReporter(orphanConfig{interval: o.OrphanReporting.Interval,
			sampleSize: o.OrphanReporting.SampleSize}, every, o.Logger)
	}
	return ob
}

// close stops the reports and the logging meter, each logging what it
// holds, and waits for their goroutines.
func (ob *observers) close() {
	if ob.threshold != nil {
		ob.threshold.close()
	}
	if ob.orphans != nil {
		ob.orphans.close()
	}
	if ob.logMeter != nil {
		ob.logMeter.close()
	}
}

// onOrphan is conn.Options.OnOrphan when the orphan report is on: it runs
// on a connection's reader, after the connection released its lock, and
// does no more than fill a record and insert it in the report's sample
// (no allocation, no code of the caller's).
func (ob *observers) onOrphan(x conn.Orphan) {
	r := opRecord{service: ServiceKV, operation: x.Operation, timeout: x.Timeout,
		dispatched: true, operationID: x.Opaque, localID: x.ConnID, localSocket: x.LocalAddr, remoteSocket: x.RemoteAddr}
	if r.operation == "" {
		r.operation = opcodeSpanName(x.OpCode)
	}
	sent := x.Sent
	if sent.IsZero() {
		sent = x.Abandoned // its caller said nothing: from when it left
	}
	r.total = x.Arrived.Sub(sent)
	r.lastDispatch, r.totalDispatch = r.total, r.total
	if x.HasServerDuration {
		r.hasServer = true
		r.lastServer, r.totalServer = x.ServerDuration, x.ServerDuration
	}
	ob.orphans.orphan(&r)
}

// opcodeSpanName names an operation a connection knows only by its
// opcode (a request sent without an Origin).
func opcodeSpanName(op memdx.OpCode) string {
	switch op {
	case memdx.OpNoop:
		return "ping"
	case memdx.OpGet:
		return "get"
	case memdx.OpGetClusterConfig:
		return "get_cluster_config"
	case memdx.OpCollectionsGetID:
		return "get_collection_id"
	}
	return op.String()
}

// opMeters makes and keeps the recorders of MetricOperationDuration, one
// per operation, scope, collection and outcome, each asked of the Meter
// once. A successful operation of a listed name finds its recorder
// through its Collection (collMeters: an index, an atomic load), without
// hashing; any other through a map replaced, never changed, when a
// recorder is added (found without a lock).
type opMeters struct {
	ob *observers
	m  atomic.Pointer[map[meterKey4]ValueRecorder]
	// colls are the collections' recorders of successes, by
	// "scope.collection" (guarded by mu), for a Collection made again.
	colls map[string]*collMeters
	mu    sync.Mutex // serialises additions
}

// meterKey4 identifies a recorder (the bucket is the client's).
type meterKey4 struct{ op, scope, collection, errType string }

// collMeters are one collection's recorders of successes, by the index of
// the operation's name in opNames.
type collMeters struct {
	ok [len(opNames)]atomic.Pointer[ValueRecorder]
}

func (m *opMeters) init(ob *observers) {
	m.ob = ob
	empty := map[meterKey4]ValueRecorder{}
	m.m.Store(&empty)
	m.colls = map[string]*collMeters{}
}

// recorder returns k's recorder, asking the Meter for it the first time.
func (m *opMeters) recorder(k meterKey4) ValueRecorder {
	if r, ok := (*m.m.Load())[k]; ok {
		return r
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.m.Load()
	if r, ok := old[k]; ok {
		return r
	}
	attrs := map[string]string{
		AttributeSystemName: SystemCouchbase, AttributeService: ServiceKV, AttributeOperationName: k.op,
		AttributeBucketName: m.ob.bucket, AttributeScopeName: k.scope, AttributeCollectionName: k.collection,
	}
	if k.errType != "" {
		attrs[AttributeErrorType] = k.errType
	}
	var r ValueRecorder
	if m.ob.builtin {
		r, _ = m.ob.meter.ValueRecorder(MetricOperationDuration, attrs) // the logging meter never fails
	} else {
		r = m.ob.hooks.valueRecorder(m.ob.meter, MetricOperationDuration, attrs)
	}
	next := make(map[meterKey4]ValueRecorder, len(old)+1)
	for kk, v := range old {
		next[kk] = v
	}
	next[k] = r
	m.m.Store(&next)
	return r
}

// succeeded returns the recorder of coll's successful operations of
// opNames[op].
func (m *opMeters) succeeded(coll *Collection, op int) ValueRecorder {
	cm := coll.meters.Load()
	if cm == nil {
		m.mu.Lock()
		if cm = m.colls[coll.path]; cm == nil {
			cm = &collMeters{}
			m.colls[coll.path] = cm
		}
		m.mu.Unlock()
		coll.meters.Store(cm)
	}
	if p := cm.ok[op].Load(); p != nil {
		return *p
	}
	r := m.recorder(meterKey4{op: opNames[op], scope: coll.scope, collection: coll.name})
	cm.ok[op].Store(&r)
	return r
}

// record records an operation's latency in microseconds: name (opNames[op]
// when listed) on coll (nil: none), with errType ("" for a success).
func (m *opMeters) record(coll *Collection, name string, op int, errType string, d time.Duration) {
	var r ValueRecorder
	if coll != nil && op != opUnlisted && errType == "" {
		r = m.succeeded(coll, op)
	} else {
		k := meterKey4{op: name, errType: errType}
		if coll != nil {
			k.scope, k.collection = coll.scope, coll.name
		}
		r = m.recorder(k)
	}
	v := uint64(max(d, 0) / time.Microsecond)
	if m.ob.builtin {
		r.RecordValue(v)
		return
	}
	m.ob.hooks.recordValue(r, v)
}
