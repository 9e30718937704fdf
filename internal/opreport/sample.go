package opreport

import (
	"encoding/json"
	"slices"
	"sync"
)

// sample keeps the slowest records of an interval (by total) and counts
// every record offered. Adding allocates nothing once its slice exists.
type sample struct {
	keep  []Record // ascending by total; cap is the sample size
	count uint64
}

func newSample(size int) *sample { return &sample{keep: make([]Record, 0, size)} }

func (s *sample) add(r *Record) {
	s.count++
	if cap(s.keep) == 0 {
		return
	}
	if len(s.keep) == cap(s.keep) {
		if r.Total <= s.keep[0].Total {
			return
		}
		copy(s.keep, s.keep[1:])
		s.keep = s.keep[:len(s.keep)-1]
	}
	i := len(s.keep)
	for i > 0 && s.keep[i-1].Total > r.Total {
		i--
	}
	s.keep = slices.Insert(s.keep, i, *r)
}

// serviceReport is one service's part of a report (RFC 0067's JSON).
type serviceReport struct {
	TotalCount  uint64  `json:"total_count"`
	TopRequests []Entry `json:"top_requests"`
}

// drain returns the service's report, slowest first, and empties s.
func (s *sample) drain() serviceReport {
	r := serviceReport{TotalCount: s.count, TopRequests: make([]Entry, len(s.keep))}
	for i := range s.keep {
		r.TopRequests[len(s.keep)-1-i] = s.keep[i].Entry()
	}
	s.keep, s.count = s.keep[:0], 0
	return r
}

// sampler is a report's state: a sample per service, under a lock that no
// caller holds for more than an insertion into a slice of sample size.
type sampler struct {
	size int

	mu       sync.Mutex
	services map[string]*sample
}

func newSampler(size int) *sampler {
	return &sampler{size: size, services: make(map[string]*sample)}
}

func (sm *sampler) add(r *Record) {
	sm.mu.Lock()
	s := sm.services[r.Service]
	if s == nil {
		s = newSample(sm.size)
		sm.services[r.Service] = s
	}
	s.add(r)
	sm.mu.Unlock()
}

// drain returns the report of what was added since the last drain (RFC
// 0067's {"<service>":{"total_count":n,"top_requests":[...]}}), or nil when
// nothing was.
func (sm *sampler) drain() []byte {
	sm.mu.Lock()
	out := make(map[string]serviceReport)
	for name, s := range sm.services {
		if s.count > 0 {
			out[name] = s.drain()
		}
	}
	sm.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	b, err := json.Marshal(out) // maps marshal in key order: a stable report
	if err != nil {
		return nil // unreachable: plain strings and numbers
	}
	return b
}
