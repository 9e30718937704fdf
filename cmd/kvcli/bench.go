package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
)

// This file holds bench's command line: its flags and their checks.
// benchrun.go runs the load, benchsummary.go reports it, benchgen.go
// shapes it.

// benchConfig is what bench was asked to do.
type benchConfig struct {
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"-"`
	DurationS   float64       `json:"duration_s,omitempty"`
	Ops         int64         `json:"ops_limit,omitempty"`
	Ratio       float64       `json:"get_ratio"`
	// Rate is the target of operations per second over all workers (0:
	// as fast as they go).
	Rate float64 `json:"rate"`
	// Values set have ValueSizeMin to ValueSizeMax bytes (uniformly).
	ValueSizeMin int    `json:"value_size_min"`
	ValueSizeMax int    `json:"value_size_max"`
	Keys         int    `json:"keys"`
	KeyDist      string `json:"key_dist"`
	// ZipfS is the zipfian distribution's exponent (with key_dist zipfian).
	ZipfS float64 `json:"zipf_s,omitempty"`
	// Durability is the level of the sets ("none": ordinary writes).
	Durability string `json:"durability"`
	// Batch is the keys per call: above 1, gets go as GetMany and sets as
	// UpsertMany of Batch keys.
	Batch     int    `json:"batch"`
	Preload   bool   `json:"preload"`
	KeyPrefix string `json:"key_prefix"`
	Seed      uint64 `json:"seed"`
}

// retryCounter is bench's Observer: it counts retries by reason.
type retryCounter struct {
	byReason [64]atomic.Uint64
}

func (r *retryCounter) AttemptStart(a client.AttemptInfo) {
	if a.Retry && int(a.RetryReason) < len(r.byReason) {
		r.byReason[a.RetryReason].Add(1)
	}
}

func (r *retryCounter) AttemptEnd(client.AttemptInfo, error) {}

func (r *retryCounter) total() uint64 {
	var n uint64
	for i := range r.byReason {
		n += r.byReason[i].Load()
	}
	return n
}

func (r *retryCounter) byName() map[string]uint64 {
	out := map[string]uint64{}
	for i := range r.byReason {
		if n := r.byReason[i].Load(); n > 0 {
			out[client.RetryReason(i).String()] = n
		}
	}
	return out
}

// benchMaxBatch is the most keys --batch puts in one call.
const benchMaxBatch = 10000

// benchMaxKeys is the most keys --keys takes. bench builds the name of
// every key before it runs (a string each: about 40 bytes with the default
// prefix), so 10 million is some 400 MB, and a preload of that many sets
// already takes minutes on a real cluster; a larger count asks for memory
// bench should not take (a typo's extra zeros were a crash out of memory).
const benchMaxKeys = 10_000_000

// benchMaxKeyTable bounds the table's memory when --key-prefix is long:
// each name is a string header (16 bytes) and the prefix and 8 digits.
// It is what 10 million names with the default prefix take (about 360 MB).
const benchMaxKeyTable = benchMaxKeys * (16 + len("kvcli-bench:") + 8)

// keyTableBytes is the memory of a table of keys names with prefix.
func keyTableBytes(keys int, prefix string) int64 {
	return int64(keys) * int64(16+len(prefix)+8)
}

// intOf is v as an int, saturated where int is 32 bits: the range checks
// that follow refuse it, naming a value of the same size.
func intOf(v int64) int {
	return int(max(min(v, math.MaxInt), math.MinInt))
}

func cmdBench(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("bench")
	cfg := benchConfig{}
	conc := &intFlag{v: 16}
	fs.Var(conc, "concurrency", "`N` concurrent workers, each running one operation at a time (decimal or hex)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run (ignored with --ops)")
	ops := &intFlag{}
	fs.Var(ops, "ops", "stop after `N` operations instead of after --duration (decimal or hex)")
	fs.Float64Var(&cfg.Ratio, "ratio", 0.5, "fraction of operations that are gets (the rest are sets)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "target `ops/s` over all workers, on a fixed schedule (0: as fast as they go)")
	valueSize := fs.String("value-size", "32", "bytes per value set: `N`, or MIN-MAX for sizes drawn uniformly in that range")
	keys := &numberFlag{v: 10000, bits: strconv.IntSize - 1}
	fs.Var(keys, "keys", fmt.Sprintf("the number `N` of distinct keys (decimal or hex; at most %d)", benchMaxKeys))
	fs.StringVar(&cfg.KeyDist, "key-dist", keyDistUniform, "how keys are chosen: uniform, or zipfian (key k with probability proportional to (1+k)^-s)")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", benchDefaultZipfS, "the zipfian exponent s (more than 1; larger is more skewed)")
	batch := &intFlag{v: 1}
	fs.Var(batch, "batch", "keys per call: with N > 1 a worker's gets go as one GetMany of `N` keys and its sets as one UpsertMany (decimal or hex)")
	durability := fs.String("durability", "none", "durability of the run's sets (not the preload's): none, majority, majorityAndPersistActive or persistToMajority (Couchbase only)")
	fs.BoolVar(&cfg.Preload, "preload", true, "set every key once before the run, so gets find documents")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", "kvcli-bench:", "prefix of the keys")
	seed := &numberFlag{v: 1, bits: 64}
	fs.Var(seed, "seed", "`SEED` of the choice of keys, operations and value sizes (decimal or hex)")
	if _, code, ok := inv.parse(fs, args, 0, 0); !ok {
		return code
	}
	cfg.Keys, cfg.Seed = int(keys.v), seed.v
	cfg.Concurrency, cfg.Ops, cfg.Batch = intOf(conc.v), ops.v, intOf(batch.v)
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	level, err := cfg.complete(*valueSize, *durability, given)
	if err != nil {
		inv.usageError("%v", err)
		return exitUsage
	}
	// memcached has no synchronous writes: refuse before connecting (a
	// target that does not resolve is left for connect to report).
	if t, err := inv.resolveTarget(); err == nil && t.cs.Scheme.IsMemcached() && level != client.DurabilityNone {
		inv.usageError("--durability %s: %s:// has no durable writes (durability is Couchbase Server's); drop --durability", level, t.cs.Scheme)
		return exitUsage
	}
	rc := &retryCounter{}
	inv.reports = &reports{}
	s, code := inv.connect(ctx, rc)
	if s == nil {
		return code
	}
	defer s.Close()
	b := &bench{inv: inv, cfg: cfg, col: s.col, rc: rc, target: redactConnStr(s.t.connStr), durability: level, clock: realClock{},
		close: s.Close}
	return b.run(ctx)
}

// complete reads the flags that need parsing (--value-size,
// --durability), checks every flag's range and fills what follows from
// them. given holds the flags the command line set. Its errors are usage
// errors.
func (cfg *benchConfig) complete(valueSize, durability string, given map[string]bool) (client.DurabilityLevel, error) {
	var err error
	cfg.ValueSizeMin, cfg.ValueSizeMax, err = parseValueSize(valueSize)
	if err != nil {
		return 0, err
	}
	level, err := parseDurability(durability)
	if err != nil {
		return 0, err
	}
	cfg.Durability = level.String()
	switch {
	case cfg.Concurrency < 1 || cfg.Concurrency > 10000:
		return 0, fmt.Errorf("--concurrency %d: want 1 to 10000", cfg.Concurrency)
	case cfg.Ratio < 0 || cfg.Ratio > 1:
		return 0, fmt.Errorf("--ratio %v: want 0 to 1 (the fraction of gets)", cfg.Ratio)
	case !validRate(cfg.Rate):
		return 0, fmt.Errorf("--rate %v: want 0 (as fast as possible) or a positive number of operations per second", cfg.Rate)
	case cfg.KeyDist != keyDistUniform && cfg.KeyDist != keyDistZipfian:
		return 0, fmt.Errorf("--key-dist %q: want uniform or zipfian", cfg.KeyDist)
	case given["zipf-s"] && cfg.KeyDist != keyDistZipfian:
		return 0, errors.New("--zipf-s is the zipfian exponent: give it with --key-dist zipfian")
	case !(cfg.ZipfS > 1) || math.IsInf(cfg.ZipfS, 0):
		return 0, fmt.Errorf("--zipf-s %v: want a finite number more than 1", cfg.ZipfS)
	case cfg.Batch < 1 || cfg.Batch > benchMaxBatch:
		return 0, fmt.Errorf("--batch %d: want 1 to %d keys per call", cfg.Batch, benchMaxBatch)
	case cfg.Keys < 1 || cfg.Keys > benchMaxKeys:
		return 0, fmt.Errorf("--keys %d: want 1 to %d", cfg.Keys, benchMaxKeys)
	case keyTableBytes(cfg.Keys, cfg.KeyPrefix) > int64(benchMaxKeyTable):
		return 0, fmt.Errorf("--keys %d with a %d-byte --key-prefix: their names would take %d MiB (bench builds them all first); want at most %d keys with this prefix",
			cfg.Keys, len(cfg.KeyPrefix), keyTableBytes(cfg.Keys, cfg.KeyPrefix)>>20, benchMaxKeyTable/(16+len(cfg.KeyPrefix)+8))
	case cfg.Ops < 0:
		return 0, fmt.Errorf("--ops %d: want a positive count", cfg.Ops)
	case cfg.Ops == 0 && cfg.Duration <= 0:
		return 0, errors.New("--duration must be positive (or give --ops)")
	}
	if cfg.Ops > 0 {
		cfg.Duration = 0
	}
	cfg.DurationS = cfg.Duration.Seconds()
	if cfg.KeyDist != keyDistZipfian {
		cfg.ZipfS = 0
	}
	return level, nil
}

// redactConnStr is the connection string to print (it never holds a
// password, but options may be long): the scheme, hosts and bucket.
func redactConnStr(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}
