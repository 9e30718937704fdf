package client

import (
	"context"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/hookguard"
	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/internal/meter"
	"github.com/kvwire/kvwire/internal/opreport"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/retry"
)

// observers are a client's observability components, as Options set them
// up: the operations' spans, timings, records and latencies
// (internal/optrace, with the tracer, the meter and the slow-operation
// report), the guard that calls the tracer and the meter, and the orphan
// report (nil when off). newObservers starts the reports' goroutines;
// close stops them.
type observers struct {
	optrace.Observers
	hooks   *hookGuard
	orphans *opreport.Orphans // nil: off
	// clock is the client's Clock when it is not the real one (nil when it
	// is): a late answer's arrival is read on it (onOrphan).
	clock retry.Clock

	bucket string
	// clientID is RFC 0067's client id, the first half of every
	// connection's local id (conn.Options.ClientID).
	clientID string
	// topology is the cluster's topology, whose config has the cluster's
	// labels every span carries; set once connected (nil before: no
	// labels).
	topology func() *cluster.Topology
}

// collMeters are a Collection as its operations' observers see it, with
// the recorders of its successful operations' latencies (optrace.Coll),
// kept in the Collection and found once.
type collMeters = optrace.Coll

// newObservers sets up o's observers and starts the reports. o has its
// defaults filled in. Operations are timed on clock (the client's, as
// their deadlines are); the reports' intervals are kept on every, so that
// a test's fake Clock holds no timer of theirs (a report is logged on
// Close too).
func newObservers(o *Options, clock, every retry.Clock, clientID string) *observers {
	ob := &observers{hooks: newHookGuard(o.Logger, every), bucket: o.Bucket, clientID: clientID}
	if clock != retry.RealClock() {
		ob.clock = clock
	}
	cfg := optrace.Config{Clock: clock, Service: ServiceKV, Bucket: o.Bucket, ErrorTypeOther: ErrorTypeOther, Guard: ob.hooks.Guard}
	if tracerOn(o.Tracer) { // NoopTracer: no span is made
		cfg.Tracer = spanStarter{ob.hooks, o.Tracer}
		cfg.ClusterLabels = ob.clusterLabels
	}
	switch {
	case o.Meter != nil:
		if meterOn(o.Meter) {
			m := o.Meter
			cfg.Recorder = func(k optrace.MeterKey) hookguard.ValueRecorder { return ob.recorder(m, k) }
		}
	case !o.LoggingMeter.Disabled:
		cfg.LoggingMeter = meter.NewLogging(logreport.Config{Message: LoggingMeterMessage, Key: ReportAttribute,
			Interval: positiveOr(o.LoggingMeter.Interval, DefaultLoggingMeterInterval), Clock: every, Logger: o.Logger})
	}
	if th := o.ThresholdLogging; !th.Disabled {
		cfg.Threshold = opreport.NewThreshold(ServiceKV, positiveOr(th.KVThreshold, DefaultKVThreshold),
			reportConfig(ThresholdReportMessage, th.Interval, DefaultThresholdInterval, every, o), positiveOr(th.SampleSize, DefaultThresholdSampleSize))
	}
	if or := o.OrphanReporting; !or.Disabled {
		ob.orphans = opreport.NewOrphans(reportConfig(OrphanReportMessage, or.Interval, DefaultOrphanInterval, every, o),
			positiveOr(or.SampleSize, DefaultOrphanSampleSize))
		cfg.Orphans = ob.orphans
	}
	ob.Init(cfg)
	return ob
}

// clusterLabels are the cluster's name and uuid as its config publishes
// them ("" when it does not, or before the client connected).
func (ob *observers) clusterLabels() (name, uuid string) {
	if ob.topology == nil {
		return "", ""
	}
	if t := ob.topology(); t != nil {
		if cfg := t.Config(); cfg != nil {
			return cfg.ClusterName(), cfg.ClusterUUID()
		}
	}
	return "", ""
}

// reportConfig is how a report is logged: with msg, on clock (a
// non-positive interval takes the default given).
func reportConfig(msg string, interval, defInterval time.Duration, clock retry.Clock, o *Options) logreport.Config {
	return logreport.Config{Message: msg, Key: ReportAttribute, Interval: positiveOr(interval, defInterval), Clock: clock, Logger: o.Logger}
}

// positiveOr is v, or def when v is not positive.
func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// recorder asks m for the recorder of MetricOperationDuration with k's
// attributes (RFC 0067's), through the guard.
func (ob *observers) recorder(m Meter, k optrace.MeterKey) hookguard.ValueRecorder {
	attrs := map[string]string{AttributeSystemName: SystemCouchbase, AttributeService: ServiceKV, AttributeOperationName: k.Op}
	// The bucket, scope and collection when they apply, as the spans have
	// them: a memcached:// client has no bucket, a node's operation (a
	// ping, stats) no collection.
	if ob.bucket != "" {
		attrs[AttributeBucketName] = ob.bucket
	}
	if k.Scope != "" {
		attrs[AttributeScopeName] = k.Scope
	}
	if k.Collection != "" {
		attrs[AttributeCollectionName] = k.Collection
	}
	if k.ErrType != "" {
		attrs[AttributeErrorType] = k.ErrType
	}
	// The cluster's labels, as on every span, when its config publishes
	// them (RFC 0067: "on all spans and metrics"). The recorder is kept
	// for good: the labels are those of the config when it was asked for
	// (a cluster renamed later keeps its old name here).
	name, uuid := ob.clusterLabels()
	if name != "" {
		attrs[AttributeClusterName] = name
	}
	if uuid != "" {
		attrs[AttributeClusterUUID] = uuid
	}
	return ob.hooks.valueRecorder(m, MetricOperationDuration, attrs)
}

// coll is coll as its operations' observers see it (nil for none), made
// the first time (newColl).
func (ob *observers) coll(coll *Collection) *optrace.Coll {
	if coll == nil {
		return nil
	}
	if c := coll.meters.Load(); c != nil {
		return c
	}
	return ob.newColl(coll)
}

func (ob *observers) newColl(coll *Collection) *optrace.Coll {
	c := ob.Coll(coll.scope, coll.name, coll.path)
	coll.meters.Store(c)
	return c
}

// spanStarter is the tracer as internal/optrace calls it: through the
// guard, with the client's span types.
type spanStarter struct {
	g *hookGuard
	t RequestTracer
}

func (s spanStarter) Start(ctx context.Context, name string, parent hookguard.Span, start time.Time) hookguard.Span {
	p, _ := parent.(RequestSpan) // every span is one the tracer made
	return s.g.startSpan(s.t, ctx, name, p, start)
}

func (s spanStarter) SetStatus(span hookguard.Span, failed bool) {
	status := SpanStatusOK
	if failed {
		status = SpanStatusError
	}
	if rs, ok := span.(RequestSpan); ok {
		s.g.setStatus(rs, status)
	}
}

// close stops the reports and the logging meter, each logging what it
// holds, and waits for their goroutines.
func (ob *observers) close() { ob.Close() }

// onOrphan is conn.Options.OnOrphan when the orphan report is on: it runs
// on a connection's reader, after the connection released its lock, and
// does no more than fill a record and insert it in the report's sample
// (no allocation, no code of the caller's but a test's Clock). The
// request's Sent is a reading of the client's Clock, and so is the
// connection's Arrived (conn.Options.Clock is the client's Clock when it
// has one): on another Clock than the real one (Options.Clock) the arrival
// is read on it here once more, moments later, so that the total is the
// difference of two readings of the one clock whatever the connection
// read.
func (ob *observers) onOrphan(x conn.Orphan) {
	arrived := x.Arrived
	if ob.clock != nil && !x.Sent.IsZero() {
		arrived = ob.clock.Now()
	}
	r := optrace.OrphanRecord(ServiceKV, x, arrived)
	ob.orphans.Orphan(&r)
}
