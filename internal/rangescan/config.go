package rangescan

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

// Offered returns the config a scan of the bucket routed by t reads, or
// why that bucket offers no range scans: memcached (a memcached://
// client), a memcached bucket, a bucket without vbuckets or without the
// rangeScan capability (Couchbase Server 7.2+).
func Offered(memcached bool, t *cluster.Topology, bucket string) (*vbmap.Config, error) {
	if memcached {
		return nil, errors.New("memcached has no range scans")
	}
	var cfg *vbmap.Config
	if t != nil {
		cfg = t.Config()
		if t.Ketama() {
			return nil, fmt.Errorf("bucket %q is a memcached bucket, which has no range scans", bucket)
		}
	}
	if cfg == nil || !cfg.HasVbucketMap() {
		return nil, errors.New("range scans need a bucket with vbuckets")
	}
	if !cfg.HasBucketCapability("rangeScan") {
		return nil, errors.New("the bucket does not offer range scans (capability rangeScan, Couchbase Server 7.2+)")
	}
	return cfg, nil
}

// PrefixRange is the range of the keys that start with prefix, keys being
// at most maxKeyLength bytes: from prefix ("\x00" for none) to prefix
// followed by 0xff up to maxKeyLength bytes, or why there is none.
func PrefixRange(prefix string, maxKeyLength int) (*memdx.RangeScanRange, error) {
	if len(prefix) > maxKeyLength {
		return nil, fmt.Errorf("prefix of %d bytes, at most %d", len(prefix), maxKeyLength)
	}
	return &memdx.RangeScanRange{Start: []byte(cmp.Or(prefix, "\x00")),
		End: []byte(prefix + strings.Repeat("\xff", maxKeyLength-len(prefix)))}, nil
}

// Spec is a scan as its caller asks for it, before it is checked.
type Spec struct {
	KeyOnly              bool
	Concurrency          int
	ItemLimit, ByteLimit uint32
	// Range is a range scan's; nil for a sampling scan, of Samples
	// documents at most, seeded by Seed (0: one at random).
	Range   *memdx.RangeScanRange
	Samples uint64
	Seed    uint32
	// MaxKeyLength bounds a range's terms.
	MaxKeyLength int
	// Tokens are the mutations the scan must see (ScanOptions.ConsistentWith).
	Tokens []Token
	// Timeout is each request's (a create's snapshot wait is 90% of it).
	Timeout time.Duration
}

// Token is a mutation a scan must see: its vbucket, the vbucket's UUID and
// the sequence number.
type Token struct {
	Vbucket uint16
	VbUUID  uint64
	Seqno   uint64
}

// Config checks sp against a bucket of config cfg and returns what the
// scan reads, or why it is refused.
func (sp *Spec) Config(cfg *vbmap.Config) (Config, error) {
	sc := Config{KeyOnly: sp.KeyOnly, Concurrency: sp.Concurrency, ItemLimit: sp.ItemLimit, ByteLimit: sp.ByteLimit, Range: sp.Range,
		TimeLimitMs: ContinueTimeLimit(sp.Timeout)}
	if sc.Range == nil {
		if sp.Samples == 0 {
			return sc, errors.New("a sampling scan needs a Limit above 0")
		}
		seed := sp.Seed
		for seed == 0 {
			seed = rand.Uint32()
		}
		sc.Sampling = &memdx.RangeScanSampling{Samples: sp.Samples, Seed: seed}
		sc.Limit = sp.Samples
	}
	if sc.Range != nil {
		for _, k := range [][]byte{sc.Range.Start, sc.Range.End} {
			if len(k) == 0 || len(k) > sp.MaxKeyLength {
				return sc, fmt.Errorf("range term of %d bytes: 1 to %d", len(k), sp.MaxKeyLength)
			}
		}
	}
	if len(sp.Tokens) > 0 {
		sc.Snapshots = make(map[uint16]memdx.RangeScanSnapshot, len(sp.Tokens))
		for _, tok := range sp.Tokens {
			if int(tok.Vbucket) >= cfg.NumVbuckets() {
				return sc, fmt.Errorf("mutation token of vbucket %d; the bucket has %d", tok.Vbucket, cfg.NumVbuckets())
			}
			cur, ok := sc.Snapshots[tok.Vbucket]
			if ok && cur.VbUUID != tok.VbUUID {
				return sc, fmt.Errorf("two mutation tokens of vbucket %d with different UUIDs (%d, %d)", tok.Vbucket, cur.VbUUID, tok.VbUUID)
			}
			if !ok || tok.Seqno > cur.Seqno {
				// Each attempt of a create sets the wait anew (prepare).
				sc.Snapshots[tok.Vbucket] = memdx.RangeScanSnapshot{VbUUID: tok.VbUUID, Seqno: tok.Seqno,
					TimeoutMs: SnapshotWait(sp.Timeout)}
			}
		}
	}
	// Encoding checks what the server would refuse as invalid.
	if _, err := memdx.AppendRangeScanCreateValue(nil, sc.CreateConfig(0, nil)); err != nil {
		return sc, err
	}
	sc.Vbuckets = Order(cfg)
	return sc, nil
}

// SnapshotWait is how long a range-scan create asks the server to wait for
// its snapshot's seqno when left is what the request has left: 90% of it
// (at least 1 ms), so that the server answers before the client gives up,
// on a retried create too (the same wait again would outlive the client's
// deadline, leaving the create ambiguous and perhaps a scan no one reads).
// 90% is left - left/10: left*9/10 overflows for a timeout over some 32
// years and would ask for 1 ms.
func SnapshotWait(left time.Duration) uint32 {
	return uint32(min(max((left-left/10).Milliseconds(), 1), 1<<31))
}

// MaxContinueTimeLimit bounds a continue's time limit (ContinueTimeLimit)
// however long its attempt has left. kv_engine has no default of its own
// (0 is no limit) and ends a continue at its limit with the items so far,
// so a short limit costs a round trip per limit's worth of a slow read,
// while a long one holds the connection: a continue is not reorderable,
// and every later request on it (an operation with the default 2.5 s
// KVTimeout, the health check's probe, a config fetch) waits behind it.
// One second keeps such a wait well within a KV timeout.
const MaxContinueTimeLimit = time.Second

// ContinueTimeLimit is the time limit (ms) a RANGE_SCAN_CONTINUE asks of
// the server when left is what the request has left: half of it, at least
// 1 ms and at most MaxContinueTimeLimit. kv_engine reads a limit of 0 as none (docs/range_scans/
// range_scan_continue.md): such a continue runs until its item or byte
// limit or the end of the vbucket, however long a sparse range or a large
// vbucket read from disk takes. RANGE_SCAN_CONTINUE is not reorderable:
// on a connection with UnorderedExecution every later request waits
// behind it, the health check's NOOP too. With the limit the server ends
// the continue then (it checks its limits after each item, so it still
// returns one) with RANGE_SCAN_MORE and the items so far, well before the
// client gives up, the rest of the time left carrying the last batch; the
// scan asks for the next. The connection knows the continue's answer is
// due by then (conn's answerBy) and holds its probe until it is.
func ContinueTimeLimit(left time.Duration) uint32 {
	return uint32(max(min(left/2, MaxContinueTimeLimit).Milliseconds(), 1))
}

// SetContinueTimeLimit sets the time limit of req, a RANGE_SCAN_CONTINUE
// (memdx.NewRangeScanContinue), to ContinueTimeLimit(left): each attempt
// asks for a limit within the time it has left.
func SetContinueTimeLimit(req *memdx.Request, left time.Duration) {
	if e := req.ExtrasBytes(); req.OpCode == memdx.OpRangeScanContinue && len(e) == 28 {
		binary.BigEndian.PutUint32(e[20:24], ContinueTimeLimit(left)) // id, item limit, time limit, byte limit
	}
}
