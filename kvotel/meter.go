package kvotel

import (
	"context"
	"errors"
	"sync"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Meter is a client.Meter making OpenTelemetry instruments: a value
// recorder is a histogram, a counter an int64 counter.
// client.MetricOperationDuration, recorded by the client in microseconds,
// becomes a float64 histogram in seconds (unit "s", with the semantic
// conventions' bucket boundaries, 1 ms to 10 s), as RFC 0067 and
// OpenTelemetry's database semantic conventions want; other value
// recorders are int64 histograms of the values as given.
type Meter struct {
	meter metric.Meter

	mu         sync.Mutex
	durations  map[string]metric.Float64Histogram
	histograms map[string]metric.Int64Histogram
	counters   map[string]metric.Int64Counter
}

// NewMeter returns a Meter whose instruments mp's meter makes; nil is
// OpenTelemetry's global MeterProvider (otel.GetMeterProvider).
func NewMeter(mp metric.MeterProvider) *Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return &Meter{meter: mp.Meter(ScopeName, metric.WithInstrumentationVersion(scopeVersion())),
		durations:  make(map[string]metric.Float64Histogram),
		histograms: make(map[string]metric.Int64Histogram),
		counters:   make(map[string]metric.Int64Counter)}
}

// durationBuckets are the bucket boundaries of
// client.MetricOperationDuration, in seconds: the ones OpenTelemetry's
// database semantic conventions give db.client.operation.duration. The
// SDK's default boundaries (0, 5, 10, ..., 10000) are meant for
// milliseconds: in seconds they would put every KV operation in one
// bucket.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// attributeSet is attrs as an OpenTelemetry attribute set.
func attributeSet(attrs map[string]string) attribute.Set {
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kvs = append(kvs, attribute.String(k, v))
	}
	return attribute.NewSet(kvs...) // sorted by key
}

// errNoMeter is the error of a nil or zero Meter's instruments.
var errNoMeter = errors.New("kvotel: a Meter not made by NewMeter records nothing")

// ValueRecorder returns a recorder on name's histogram with attrs. The
// instrument is made once per name; an OpenTelemetry error making it is
// returned.
func (m *Meter) ValueRecorder(name string, attrs map[string]string) (client.ValueRecorder, error) {
	if m == nil || m.meter == nil {
		return nil, errNoMeter
	}
	opts := []metric.RecordOption{metric.WithAttributeSet(attributeSet(attrs))}
	m.mu.Lock()
	defer m.mu.Unlock()
	if name == client.MetricOperationDuration {
		h, ok := m.durations[name]
		if !ok {
			var err error
			h, err = m.meter.Float64Histogram(name, metric.WithUnit("s"),
				metric.WithDescription("Duration of database client operations."),
				metric.WithExplicitBucketBoundaries(durationBuckets...))
			if err != nil {
				return nil, err
			}
			m.durations[name] = h
		}
		return &secondsRecorder{h: h, opts: opts}, nil
	}
	h, ok := m.histograms[name]
	if !ok {
		var err error
		if h, err = m.meter.Int64Histogram(name); err != nil {
			return nil, err
		}
		m.histograms[name] = h
	}
	return &int64Recorder{h: h, opts: opts}, nil
}

// Counter returns a counter on name with attrs, made once per name.
func (m *Meter) Counter(name string, attrs map[string]string) (client.Counter, error) {
	if m == nil || m.meter == nil {
		return nil, errNoMeter
	}
	opts := []metric.AddOption{metric.WithAttributeSet(attributeSet(attrs))}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.counters[name]
	if !ok {
		var err error
		if c, err = m.meter.Int64Counter(name); err != nil {
			return nil, err
		}
		m.counters[name] = c
	}
	return &counter{c: c, opts: opts}, nil
}

// secondsRecorder records microseconds as seconds.
type secondsRecorder struct {
	h    metric.Float64Histogram
	opts []metric.RecordOption
}

func (r *secondsRecorder) RecordValue(v uint64) {
	r.h.Record(context.Background(), float64(v)/1e6, r.opts...)
}

type int64Recorder struct {
	h    metric.Int64Histogram
	opts []metric.RecordOption
}

func (r *int64Recorder) RecordValue(v uint64) {
	r.h.Record(context.Background(), int64(min(v, uint64(1<<63-1))), r.opts...)
}

type counter struct {
	c    metric.Int64Counter
	opts []metric.AddOption
}

func (c *counter) IncrementBy(n uint64) {
	c.c.Add(context.Background(), int64(min(n, uint64(1<<63-1))), c.opts...)
}
