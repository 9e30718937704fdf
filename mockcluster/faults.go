package mockcluster

import (
	"encoding/binary"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Request describes a request to a fault's matcher. Key and Packet alias the
// connection's read buffer: they are valid only during the call.
type Request struct {
	// Node is the id of the node that received the request.
	Node int
	// Bucket is the connection's selected bucket ("" for none).
	Bucket string
	OpCode memdx.OpCode
	// Vbucket is the request's vbucket field.
	Vbucket uint16
	// CollectionID and Key are the request's document key split from its
	// collection prefix (CollectionID is 0 when collections are off).
	CollectionID uint32
	Key          []byte
	Cas          uint64
	// Packet is the whole request.
	Packet *memdx.Packet
}

// Match selects the requests a fault applies to. Every set field must match;
// the zero Match matches every request.
type Match struct {
	// Nodes restricts the fault to these node ids.
	Nodes []int
	// OpCodes restricts the fault to these opcodes.
	OpCodes []memdx.OpCode
	// Bucket restricts the fault to connections that selected this bucket.
	Bucket string
	// Key restricts the fault to requests for this document key (without
	// collection prefix).
	Key string
	// Func, when set, must also return true. It runs on the connection's
	// serve goroutine, as Control's function does: it must not block, nor
	// call what closes connections and waits for their goroutines (Stop,
	// DropConnections, RemoveUser, RemoveBucket, RemoveNode, Close), which
	// would wait for itself, nor what Control says its function must not.
	// Start those on another goroutine, or use Action.Close to drop this
	// connection.
	Func func(r *Request) bool
}

func (m *Match) matches(r *Request) bool {
	if len(m.Nodes) > 0 && !contains(m.Nodes, r.Node) {
		return false
	}
	if len(m.OpCodes) > 0 && !contains(m.OpCodes, r.OpCode) {
		return false
	}
	if m.Bucket != "" && m.Bucket != r.Bucket {
		return false
	}
	if m.Key != "" && m.Key != string(r.Key) {
		return false
	}
	return m.Func == nil || m.Func(r)
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// CloseMode says whether and when a fault closes the connection.
type CloseMode int

const (
	// NoClose keeps the connection.
	NoClose CloseMode = iota
	// CloseBeforeApply closes the connection instead of running the request:
	// the request has no effect and gets no answer. Answers to earlier
	// requests are written first.
	CloseBeforeApply
	// CloseAfterApply runs the request, discards its answer and closes the
	// connection: the client cannot know that the request took effect.
	CloseAfterApply
)

// Action is what a fault does to a matching request.
type Action struct {
	// Status, when not zero (success), is answered instead of running the
	// request. NOT_MY_VBUCKET without a Value carries the bucket's config as
	// the server's does (subject to NMV dedupe). Statuses are sent as given,
	// without the non-XERROR remapping the mock applies to its own answers.
	Status memdx.Status
	// Value is the body of the Status answer. Nil gives, with XERROR
	// negotiated, an error context naming the injected fault.
	Value []byte
	// Delay holds the answer (a Status answer or the request's own) for this
	// long. Without UnorderedExecution the connection processes nothing else
	// meanwhile, as the server would; with it, later requests kv_engine may
	// reorder are answered first, but a later barrier (a command outside
	// is_reorder_supported, NOOP for one, or one with the Barrier frame
	// info: see the package doc) waits for the held answer, and a held
	// barrier holds every later request.
	Delay time.Duration
	// Hold, when not nil, holds the answer as Delay does, until it is
	// closed (Delay is then ignored): a test releases the answer when it
	// has seen what it waits for, instead of guessing a duration.
	Hold <-chan struct{}
	// Close closes the connection before or after the request is applied.
	Close CloseMode
}

// Fault is a fault to inject: what it matches, what it does, how often.
type Fault struct {
	Match
	Action
	// Times is how many requests the fault applies to before it removes
	// itself: 1 for once; 0 until Remove.
	Times int
}

// Control is a registered fault.
type Control struct {
	reg    *faultRegistry
	match  Match
	decide func(r *Request) (Action, bool)
	times  int
	hits   atomic.Int64
	done   chan struct{}
	once   sync.Once
}

// Hits returns how many requests the fault applied to.
func (h *Control) Hits() int { return int(h.hits.Load()) }

// Remove unregisters the fault. Requests already delayed by it are still
// answered.
func (h *Control) Remove() { h.reg.remove(h) }

// Done is closed when the fault is removed (by Remove, or after Times
// hits).
func (h *Control) Done() <-chan struct{} { return h.done }

type faultRegistry struct {
	// mu orders the judgments: find runs under it.
	mu       sync.Mutex
	controls []*Control
	count    atomic.Int32
	// order is held from a request's judgment until it was handled (see
	// Control): by a request for a document, its key's stripe (and all
	// read-locked); by RANGE_SCAN_CONTINUE and RANGE_SCAN_CANCEL, all
	// read-locked alone; by any other request, all write-locked. While no
	// fault is registered a request is handled unjudged with all
	// read-locked, and add write-locks all: a fault registered while such
	// a request is handled waits for it, so that its calls find it applied.
	order struct {
		all  sync.RWMutex
		keys [orderStripes]sync.Mutex
	}
}

// orderStripes is how many locks the documents' keys are spread over.
const orderStripes = 64

// stripe returns the ordering lock of req's document.
func (r *faultRegistry) stripe(req *Request) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(req.Bucket))
	var cid [5]byte
	binary.BigEndian.PutUint32(cid[:4], req.CollectionID)
	h.Write(cid[:]) // the zero byte separates the bucket name from the key
	h.Write(req.Key)
	return &r.order.keys[h.Sum32()%orderStripes]
}

// lockOrder takes the ordering locks req holds until it was handled and
// returns their release.
func (r *faultRegistry) lockOrder(req *Request, keyed bool) func() {
	switch {
	case keyed:
		r.order.all.RLock()
		mu := r.stripe(req)
		mu.Lock()
		return func() { mu.Unlock(); r.order.all.RUnlock() }
	case req.OpCode == memdx.OpRangeScanContinue || req.OpCode == memdx.OpRangeScanCancel:
		// A cancel lands while a continue of the scan runs, as on
		// kv_engine (the continue then ends RANGE_SCAN_CANCELLED).
		r.order.all.RLock()
		return r.order.all.RUnlock
	default:
		r.order.all.Lock()
		return r.order.all.Unlock
	}
}

func (r *faultRegistry) add(h *Control) *Control {
	h.reg = r
	h.done = make(chan struct{})
	// Wait for the requests being handled unjudged (conn.control, while no
	// fault was registered): the fault's calls find them applied.
	r.order.all.Lock()
	r.mu.Lock()
	r.controls = append(r.controls, h)
	r.count.Store(int32(len(r.controls)))
	r.mu.Unlock()
	r.order.all.Unlock()
	return h
}

func (r *faultRegistry) remove(h *Control) {
	r.mu.Lock()
	r.removeLocked(h)
	r.mu.Unlock()
}

func (r *faultRegistry) removeLocked(h *Control) {
	for i, x := range r.controls {
		if x == h {
			r.controls = append(r.controls[:i:i], r.controls[i+1:]...)
			break
		}
	}
	r.count.Store(int32(len(r.controls)))
	h.once.Do(func() { close(h.done) })
}

// find returns the action of the first registered fault that applies to r,
// counting the hit. r.mu is held.
func (r *faultRegistry) find(req *Request) (Action, bool) {
	for _, h := range r.controls {
		if !h.match.matches(req) {
			continue
		}
		act, ok := Action{}, true
		if h.decide != nil {
			act, ok = h.decide(req)
			if !ok {
				continue
			}
		}
		n := h.hits.Add(1)
		if h.times > 0 && n >= int64(h.times) {
			r.removeLocked(h)
		}
		return act, true
	}
	return Action{}, false
}

// AddFault registers a fault; faults apply in registration order, the first
// matching one wins. It works like kfake's ControlKey: the fault sees each
// request before the node handles it.
//
//	h := c.AddFault(mockcluster.Fault{
//		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: "k"},
//		Action: mockcluster.Action{Status: memdx.StatusTmpFail},
//		Times:  1,
//	})
//	defer h.Remove()
func (c *Cluster) AddFault(f Fault) *Control {
	act := f.Action
	return c.faults.add(&Control{match: f.Match, times: f.Times,
		decide: func(*Request) (Action, bool) { return act, true }})
}

// Control registers a function that decides, per matching request, whether
// to act and how (ok false lets the node handle the request and does not
// count as a hit). times is as Fault.Times. fn runs on the connection's
// goroutine with its write lock held: it must not block, nor call what
// closes connections and waits for them (Node.Stop, DropConnections,
// RemoveUser, RemoveBucket, RemoveNode, Close).
//
// The calls of fn (and of Match.Func) are totally ordered, across nodes
// and connections. A request for a document is handled (applied, unless
// the action stops it; its answer may still be held) before the call for
// the next request for the same document (same bucket, collection and
// key), and before the call for any request that is not for a document,
// RANGE_SCAN_CONTINUE and RANGE_SCAN_CANCEL excepted; such a request is
// handled before the next call of all. So fn finds the requests it saw
// before for the document of the one it sees applied, and nothing of that
// one: a function can tell, from a document's Bucket.MutationCount,
// whether the request for it it saw last was applied. Requests for other
// documents are handled concurrently, and RANGE_SCAN_CONTINUE and
// RANGE_SCAN_CANCEL concurrently with those and with each other (a cancel
// may land while a continue runs, as on kv_engine). Two exceptions: a
// synchronous write that a sync-write delay holds pending is applied when
// it commits, later, and a RANGE_SCAN_CREATE waiting for its snapshot's
// seqno creates its scan when the wait ends. Requests that came before
// the fault was registered count too: Control (and AddFault) waits for
// those being handled, and returns once they were.
//
// fn must not call AddFault, Control or a Control's Remove either: they
// take the lock fn runs under, and would wait for fn itself. Nor may it
// publish a config (AddNode, Failover, RemoveNode, StartRebalance, a
// Rebalance's Step or Finish, AddBucket, a Bucket's AddScope,
// AddCollection, DropCollection or DropScope), nor call CommitSyncWrites
// (which answers the pending writes on their connections): the change
// notifications and those answers take each connection's write lock,
// which this connection's goroutine holds, and another's holds while it
// waits for the fault or ordering lock. Start those on another goroutine.
func (c *Cluster) Control(m Match, times int, fn func(r *Request) (a Action, ok bool)) *Control {
	return c.faults.add(&Control{match: m, times: times, decide: fn})
}

// applyFaults runs p through the registered faults. wmu is held. The
// request's ordering lock is taken before it is judged and held until it
// was handled (see Control): a Control function judging a request for the
// same document after this one, on any connection, sees this one applied.
// The fault lock is held only while it is judged, so requests for other
// documents are handled meanwhile. Nothing here blocks (held answers wait
// on the serve goroutine or a timer, after it returns).
func (cn *conn) applyFaults(p *memdx.Packet) outcome {
	req := Request{Node: cn.n.id, OpCode: p.OpCode, Vbucket: p.Vbucket, Cas: p.Cas, Packet: p}
	b := cn.bucket.Load()
	if b != nil {
		req.Bucket = b.name
	}
	keyed := p.OpCode.HasCollectionKey()
	if keyed {
		req.Key = p.Key
		if cn.has(memdx.FeatureCollections) {
			if cid, k, err := memdx.SplitCollectionKey(p.Key); err == nil {
				req.CollectionID, req.Key = cid, k
			}
		}
	}
	defer cn.c.faults.lockOrder(&req, keyed)()
	cn.c.faults.mu.Lock()
	act, ok := cn.c.faults.find(&req)
	cn.c.faults.mu.Unlock()
	if !ok {
		return cn.handle(p)
	}
	if act.Close == CloseBeforeApply {
		return outcome{close: true}
	}
	mark := len(cn.wbuf)
	var out outcome
	switch {
	case act.Status == memdx.StatusSuccess:
		out = cn.handle(p)
	case act.Status == memdx.StatusNotMyVbucket && act.Value == nil && b != nil:
		cn.nmv(p, b.snap.Load())
	case act.Value == nil && cn.has(memdx.FeatureXerror):
		cn.reply(p, act.Status, 0, cn.outDatatype(memdx.DatatypeJSON), nil, nil,
			appendErrorJSON(nil, "mockcluster: injected fault", ""))
	default:
		cn.reply(p, act.Status, 0, 0, nil, nil, act.Value)
	}
	if act.Close == CloseAfterApply {
		cn.wbuf = cn.wbuf[:mark]
		return outcome{close: true}
	}
	if (act.Delay > 0 || act.Hold != nil) && out.wait == nil {
		resp := append([]byte(nil), cn.wbuf[mark:]...)
		cn.wbuf = cn.wbuf[:mark]
		start, timed := cn.timing.start, cn.timing.traced
		emit := func() {
			if timed {
				restampDurations(resp, start)
			}
			cn.wbuf = append(cn.wbuf, resp...)
		}
		if act.Hold != nil {
			if cn.has(memdx.FeatureUnorderedExecution) {
				cn.laterUntil(act.Hold, emit)
				return out
			}
			return outcome{wait: act.Hold, then: emit}
		}
		if cn.has(memdx.FeatureUnorderedExecution) {
			cn.later(act.Delay, emit)
			return out
		}
		return outcome{delay: act.Delay, then: emit}
	}
	return out
}
